//! Modules of the `lkcs` binary only (the library does not see them): the readable summary
//! of `lkcs simulate`, the `lkcs sweep` subcommand with its grid, CSV and plots, `lkcs cluster init`
//! and `lkcs node`.

pub(crate) mod cluster;
pub(crate) mod formula;
pub(crate) mod metrics;
pub(crate) mod node;
pub(crate) mod plot;
pub(crate) mod status;
pub(crate) mod summary;
pub(crate) mod sweep;

/// The single-threaded tokio runtime `lkcs node` and `lkcs status` run on, or the `error:`
/// line to print when it cannot start.
pub(crate) fn current_thread_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("error: cannot start the runtime: {e}"))
}

/// A bound given on the command line (`--l`, `--k`): a count of members, 0 or more. A
/// negative value is refused saying so, where clap alone would call `-1` an unexpected
/// argument.
pub(crate) fn bound_arg(s: &str) -> Result<usize, String> {
    let s = s.trim();
    if let Ok(v) = s.parse::<usize>() {
        return Ok(v);
    }
    match s.parse::<i128>() {
        Ok(v) if v < 0 => Err("a bound counts members: it cannot be negative".into()),
        Ok(_) => Err(format!(
            "a bound counts members: at most {} here",
            usize::MAX
        )),
        Err(_) => Err("expected a count of members (0, 1, 2, ...)".into()),
    }
}
