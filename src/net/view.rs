//! The replicated **view log**: the history of a cluster's views, agreed by a majority of the
//! current view through Raft ([openraft](https://docs.rs/openraft/0.9)).
//!
//! A view is a numbered member set with its start (which members are active when it begins).
//! Every member runs one [`ViewGroup`] beside its CS object; the group's voters are the
//! current view's members. Members write two kinds of [`Command`] to the log: a
//! [`Proposal`] (evict, rejoin, leave), which opens or extends a pending change, and a
//! report of their stable state for the pending view; once every surviving member has
//! reported, the pending view installs, at the same log index on every member. The rules are
//! [`ViewState::apply`]'s (`view/state.rs`), pure and deterministic; [`ViewGroup`]
//! (`view/raft.rs`) runs them under openraft.
//!
//! This is the control plane only: a view change costs a few round trips and happens when
//! membership changes, never per entry or exit. The CS path stays the papers' messages,
//! with no leader on it.
//!
//! Why openraft (rather than raft-rs): pure Rust on tokio, which `lkcs::net` already uses; it
//! logs through `tracing` as the node does; its messages are serde types, so they go through
//! the members' Noise channel as one more frame kind. The design, and what the node does with
//! each [`Applied`] outcome (freeze, report, install), is `docs/fault-tolerance.md`, sections
//! "Views" and "Changing the view".
//!
//! What is here: the log and its state machine, with an in-memory Raft store, and the Raft
//! network behind [`ViewTransport`]. The node's side (freezing the object, reporting,
//! restarting it from a view's start, leases, eviction, rejoin and leave) is
//! `net/node/views.rs`.

mod raft;
mod state;

pub use raft::{
    Event, Storage, Unreachable, ViewConfig, ViewError, ViewGroup, ViewRpc, ViewRpcReply,
    ViewTransport, WriteRefusal,
};
pub(crate) use state::majority;
pub use state::{
    Applied, Change, Command, InvalidView, Pending, Proposal, Refusal, Report, View, ViewState,
};
