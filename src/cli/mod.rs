//! Modules of the `lkcs` binary only (the library does not see them): the readable summary
//! of `lkcs simulate` and the `lkcs sweep` subcommand with its grid, CSV and plots.

pub(crate) mod formula;
pub(crate) mod plot;
pub(crate) mod summary;
pub(crate) mod sweep;
