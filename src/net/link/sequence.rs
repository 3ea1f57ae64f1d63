//! The sequence state of a link, one half per direction: the sender numbers its messages
//! and keeps them until acknowledged ([`Outgoing`]), the receiver delivers the next one only
//! ([`Incoming`]). No I/O: the link's task drives both across its connections.

use std::collections::VecDeque;

/// The sending half of a link: sequence numbers and the retransmission buffer.
#[derive(Clone, Debug)]
pub(crate) struct Outgoing<M> {
    next: u64,
    unacked: VecDeque<(u64, M)>,
}

impl<M> Default for Outgoing<M> {
    fn default() -> Self {
        Outgoing {
            next: 1,
            unacked: VecDeque::new(),
        }
    }
}

/// An acknowledgement that makes no sense: it names a message never sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AckBeyondSent {
    /// The sequence number acknowledged.
    pub acked: u64,
    /// The highest sequence number sent.
    pub sent: u64,
}

impl<M: Clone> Outgoing<M> {
    /// Numbers `msg` and keeps it until acknowledged; returns its sequence number.
    pub(crate) fn push(&mut self, msg: M) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.unacked.push_back((seq, msg));
        seq
    }

    /// The highest sequence number sent (0 for none).
    pub(crate) fn sent(&self) -> u64 {
        self.next - 1
    }

    /// Drops every message up to `seq` (a cumulative ack). An ack beyond what was sent is an
    /// error and changes nothing.
    pub(crate) fn ack(&mut self, seq: u64) -> Result<(), AckBeyondSent> {
        if seq > self.sent() {
            return Err(AckBeyondSent {
                acked: seq,
                sent: self.sent(),
            });
        }
        while self.unacked.front().is_some_and(|(s, _)| *s <= seq) {
            self.unacked.pop_front();
        }
        Ok(())
    }

    /// The messages not yet acknowledged, in order (the tests look at them).
    #[cfg(test)]
    pub(crate) fn unacked(&self) -> impl Iterator<Item = &(u64, M)> {
        self.unacked.iter()
    }

    /// The kept messages from sequence number `from` on, in order (those not yet
    /// transmitted on the current connection).
    pub(crate) fn kept_from(&self, from: u64) -> impl Iterator<Item = &(u64, M)> {
        let skip = self
            .unacked
            .front()
            .map_or(0, |(first, _)| from.saturating_sub(*first));
        self.unacked
            .iter()
            .skip(usize::try_from(skip).unwrap_or(usize::MAX))
    }

    /// How many messages wait for an acknowledgement.
    pub(crate) fn len(&self) -> usize {
        self.unacked.len()
    }

    /// Whether every message was acknowledged.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.unacked.is_empty()
    }
}

/// The receiving half of a link: the highest sequence number delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Incoming {
    delivered: u64,
}

/// What to do with an arriving sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// The next one: deliver it (it is now counted as delivered).
    Deliver,
    /// Already delivered: drop it.
    Duplicate,
    /// Past the next one: a message is missing; the connection is out of step.
    Gap {
        /// The sequence number expected.
        expected: u64,
    },
}

impl Incoming {
    /// The highest sequence number delivered (0 for none).
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Classifies `seq`, counting it as delivered when it is the next one.
    pub(crate) fn arrive(&mut self, seq: u64) -> Arrival {
        if seq <= self.delivered {
            Arrival::Duplicate
        } else if seq == self.delivered + 1 {
            self.delivered = seq;
            Arrival::Deliver
        } else {
            Arrival::Gap {
                expected: self.delivered + 1,
            }
        }
    }
}
