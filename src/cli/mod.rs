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
