//! The messages between MUTEX servers ([`MigratingMsg`]) and their kinds in the metrics.

use crate::cs::Message;
use crate::id::ProcessId;
use std::borrow::Cow;
use std::fmt::Debug;
use std::hash::Hash;

/// The messages between MUTEX servers; `T` is the controller's share of the requests info,
/// carried by `BecomeController`. The sender is known from the link.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum MigratingMsg<T> {
    /// request-cs-entry of `requester`'s request number `seq`.
    Request {
        /// The requesting server.
        requester: ProcessId,
        /// Its request number.
        seq: u64,
        /// Whether a retired controller forwarded it (kind `ForwardedRequest` in metrics).
        forwarded: bool,
    },
    /// request-granted, from the controller of epoch `epoch`.
    Granted {
        /// The grantor's epoch.
        epoch: u64,
    },
    /// exit-cs; DDC piggybacks the exiting server's next-in-q.
    ExitCs {
        /// next-in-q (DDC), `None` in CDC.
        next: Option<ProcessId>,
    },
    /// The controller wakes itself up to schedule.
    WakeUp,
    /// The controller role moves to the receiver, with the controller's information.
    BecomeController {
        /// The new epoch.
        epoch: u64,
        /// The controller's share of the requests info.
        info: T,
    },
    /// update_controller_info ("inform all"): `controller` is the controller of `epoch`.
    NewController {
        /// The new controller.
        controller: ProcessId,
        /// Its epoch.
        epoch: u64,
    },
    /// DDC: `next` follows the receiver's request number `seq` in the queue.
    NextRequestor {
        /// The receiver's request this extends.
        seq: u64,
        /// The request after it.
        next: ProcessId,
    },
    /// DDC: a next-requestor arrived after the request it extends was over; `next` is the
    /// head of the queue (deviation 6).
    Orphan {
        /// The head of the queue.
        next: ProcessId,
    },
}

impl<T> Message for MigratingMsg<T>
where
    T: Clone
        + Debug
        + Eq
        + Ord
        + Hash
        + Send
        + Sync
        + serde::Serialize
        + serde::de::DeserializeOwned
        + 'static,
{
    fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            MigratingMsg::Request {
                forwarded: false, ..
            } => "Request",
            MigratingMsg::Request {
                forwarded: true, ..
            } => "ForwardedRequest",
            MigratingMsg::Granted { .. } => "Granted",
            MigratingMsg::ExitCs { .. } => "ExitCs",
            MigratingMsg::WakeUp => "WakeUp",
            MigratingMsg::BecomeController { .. } => "BecomeController",
            MigratingMsg::NewController { .. } => "NewController",
            MigratingMsg::NextRequestor { .. } => "NextRequestor",
            MigratingMsg::Orphan { .. } => "Orphan",
        })
    }
}
