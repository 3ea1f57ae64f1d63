//! lkcs (work in progress)
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod algo;
mod arbiter;
mod catalog;
mod check;
mod config;
mod cs;
mod error;
mod id;
mod metrics;
mod runtime;
mod sim;
mod sync;
mod topology;

pub use algo::lmutin::{lmutex_instance, lmutex_system, Lmutex, Lmutin, LmutinMsg, LmutinRules};
pub use arbiter::{Action, Arbiter, ArbiterRules};
pub use catalog::{Algorithm, BoundsFile, SystemSpec, SystemVisitor};
pub use check::{check, CheckConfig, CheckReport, Verdict};
pub use config::{format_initial, parse_initial, Bounds, Instance};
pub use cs::{check_call, Complement, CsObject, CsState, Message, Outbox, Sequence, Variant};
pub use error::{CallError, ConfigError, Problem};
pub use id::{ProcessId, Stamp};
pub use metrics::{PairRecord, Stats, Waiting};
pub use runtime::{
    CondvarMailbox, CondvarReceiver, CondvarSender, CrossbeamMailbox, Handle, MailReceiver,
    MailSender, Mailbox, MonitorViolation, Runtime, RuntimeConfig, RuntimeError, RuntimeReport,
};
pub use sim::{simulate, Delay, SimConfig, SimReport, Violation, Workload};
pub use topology::Topology;
