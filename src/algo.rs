//! The algorithms, one file each (LKCS: one directory, whose two flavours, the leader rules
//! and the round trip, are a file each). Every file opens with the problem it solves, its
//! messages, its per-process variables, its complexity, its assumptions, the paper section it
//! follows and its deviations from the printed pseudo-code.

pub mod lkcs;
pub mod lmutin;
pub mod maekawa;
pub mod migrating;
pub mod mutin;
