//! The `in:I,J,...` spelling of an initial configuration, shared by the command line and the
//! cluster file.

use crate::error::{ConfigError, Problem};
use crate::id::CsState;

/// How many of the processes that do not exist [`Problem::InitialOutOfRange`] names.
const INITIAL_OUTSIDE_SHOWN: usize = 5;

/// Parses `in:I,J,...` (the processes initially in the CS; `in:` alone means none).
pub fn parse_initial(spec: &str, n: usize) -> Result<Vec<CsState>, ConfigError> {
    let list = spec.strip_prefix("in:").ok_or_else(|| {
        ConfigError::one(Problem::Invalid(format!(
            "initial configuration `{spec}` must look like in:I,J,..."
        )))
    })?;
    let mut states = vec![CsState::OutCs; n];
    let mut problems = Vec::new();
    if list.trim().is_empty() {
        return Ok(states);
    }
    // the processes that do not exist are one problem, however many they are
    let (mut outside, mut outside_count) = (Vec::new(), 0usize);
    for item in list.split(',').map(str::trim) {
        match item.parse::<usize>() {
            Ok(i) if i < n && states[i] == CsState::InCs => problems.push(Problem::Invalid(
                format!("initial configuration names P{i} twice"),
            )),
            Ok(i) if i < n => states[i] = CsState::InCs,
            Err(_) if item.is_empty() => problems.push(Problem::Invalid(format!(
                "initial configuration `{spec}` has an empty entry (expected in:I,J,...)"
            ))),
            Ok(i) => {
                outside_count += 1;
                if outside.len() < INITIAL_OUTSIDE_SHOWN {
                    outside.push(i);
                }
            }
            Err(_) => problems.push(Problem::Invalid(format!(
                "initial configuration: `{item}` is not a process index"
            ))),
        }
    }
    if outside_count > 0 {
        problems.push(Problem::InitialOutOfRange {
            first: outside,
            count: outside_count,
            n,
        });
    }
    ConfigError::check(problems)?;
    Ok(states)
}

/// Formats a configuration as `in:I,J,...`.
pub fn format_initial(states: &[CsState]) -> String {
    let ids: Vec<String> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == CsState::InCs)
        .map(|(i, _)| i.to_string())
        .collect();
    format!("in:{}", ids.join(","))
}
