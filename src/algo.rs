//! The algorithms, one file each. Every file opens with the problem it solves, its messages,
//! its per-process variables, its complexity, its assumptions, the paper section it follows
//! and its deviations from the printed pseudo-code.

pub(crate) mod lkcs;
pub(crate) mod lmutin;
pub(crate) mod maekawa;
pub(crate) mod migrating;
pub(crate) mod mutin;
