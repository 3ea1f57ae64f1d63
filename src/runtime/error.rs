//! The runtime's error type.

use super::stall::StallSnapshot;
use crate::error::{CallError, ConfigError, Problem};
use crate::id::ProcessId;
use std::fmt;
use std::sync::Arc;

/// Why a runtime operation did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The call broke the calling convention (exit while out of the CS, entry while in it, or
    /// the other operation while a sequence is still in progress); nothing was started.
    Call(CallError),
    /// The sequence did not complete in time. It keeps running: calling the same operation
    /// again resumes waiting for it.
    Timeout,
    /// The runtime has shut down.
    Shutdown,
    /// The system is stalled (nothing in flight, every live process's client blocked in a
    /// call): this call would wait for ever. The sequence stays pending. Reported only with
    /// stall detection on ([`Runtime::detect_stalls`](super::Runtime::detect_stalls)).
    Stalled(Arc<StallSnapshot>),
    /// A process thread died (its handler panicked); the algorithm can no longer make
    /// progress, so every handle reports it.
    ProcessDied(ProcessId),
    /// The runtime could not be started with these objects or this configuration.
    Config(ConfigError),
    /// A thread could not be spawned (the operating system's message).
    Spawn(String),
    /// [`Runtime::close`](super::Runtime::close) was called: no more entries.
    Closed,
    /// The runtime would start more threads than a limit of the operating system leaves
    /// room for (checked before any is started; see [`Problem::TooManyThreads`]).
    TooManyThreads {
        /// The threads the runtime would start.
        asked: usize,
        /// How many more threads the binding limit leaves room for.
        room: usize,
        /// The limit that binds.
        limit: &'static str,
        /// That limit's value.
        value: u64,
    },
}

impl From<RuntimeError> for ConfigError {
    /// A runtime that could not start, as a configuration error: its own problems, the
    /// thread limit as [`Problem::TooManyThreads`], anything else in one line.
    fn from(e: RuntimeError) -> ConfigError {
        match e {
            RuntimeError::Config(c) => c,
            RuntimeError::TooManyThreads {
                asked,
                room,
                limit,
                value,
            } => ConfigError::one(Problem::TooManyThreads {
                asked,
                room,
                limit,
                value,
            }),
            other => ConfigError::one(Problem::Invalid(other.to_string())),
        }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Call(e) => write!(f, "{e}"),
            RuntimeError::Timeout => f.write_str("the sequence did not complete in time"),
            RuntimeError::Shutdown => f.write_str("the runtime has shut down"),
            RuntimeError::Stalled(s) => write!(f, "{s}"),
            RuntimeError::ProcessDied(p) => write!(f, "the thread of {p} died"),
            RuntimeError::Config(e) => write!(f, "{e}"),
            RuntimeError::Spawn(e) => write!(f, "could not spawn a process thread: {e}"),
            RuntimeError::Closed => f.write_str("the runtime is closed: no more entries"),
            RuntimeError::TooManyThreads {
                asked,
                room,
                limit,
                value,
            } => write!(
                f,
                "{}",
                Problem::TooManyThreads {
                    asked: *asked,
                    room: *room,
                    limit,
                    value: *value,
                }
            ),
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::Call(e) => Some(e),
            RuntimeError::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CallError> for RuntimeError {
    fn from(e: CallError) -> Self {
        RuntimeError::Call(e)
    }
}
