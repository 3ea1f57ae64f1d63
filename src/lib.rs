//! lkcs (work in progress)
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod algo;
mod arbiter;
mod config;
mod cs;
mod error;
mod id;
mod runtime;
mod sync;
mod topology;

pub use algo::lmutin::{lmutex_instance, lmutex_system, Lmutex, Lmutin, LmutinMsg, LmutinRules};
pub use arbiter::{Action, Arbiter, ArbiterRules};
pub use config::{format_initial, parse_initial, Bounds, Instance};
pub use cs::{check_call, Complement, CsObject, CsState, Message, Outbox, Sequence, Variant};
pub use error::{CallError, ConfigError, Problem};
pub use id::{ProcessId, Stamp};
pub use runtime::{
    CondvarMailbox, CondvarReceiver, CondvarSender, CrossbeamMailbox, Handle, MailReceiver,
    MailSender, Mailbox, Runtime, RuntimeConfig, RuntimeError, RuntimeReport, Violation,
};
pub use topology::Topology;
