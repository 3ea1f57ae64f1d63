//! Mailboxes: the unbounded FIFO channel each process thread receives on.
//!
//! [`CrossbeamMailbox`] (the default) is `crossbeam-channel`; [`CondvarMailbox`] is built only
//! on the `crate::sync` `Mutex` + `Condvar` and a `VecDeque`, so it runs under loom (which
//! cannot see inside crossbeam).

use crate::sync::{Condvar, Mutex};
use std::collections::VecDeque;

/// Sends into a mailbox. Every sender pushes in order, so each (sender, mailbox) link is FIFO.
/// `Sync`: the process threads of a runtime share one table of every mailbox's sender (one
/// table, not a clone of it per thread: n² senders took 0.4 GB at 5,000 processes).
pub trait MailSender<T>: Clone + Send + Sync + 'static {
    /// Queues `item`; gives it back when the receiver is gone.
    fn send(&self, item: T) -> Result<(), T>;
}

/// Receives from a mailbox.
pub trait MailReceiver<T>: Send + 'static {
    /// Blocks until an item arrives; `None` once every sender is gone and the queue is empty.
    fn recv(&self) -> Option<T>;
}

/// A kind of channel: creates (sender, receiver) pairs for any item type.
pub trait Mailbox: 'static {
    /// The sending side.
    type Sender<T: Send + 'static>: MailSender<T>;
    /// The receiving side.
    type Receiver<T: Send + 'static>: MailReceiver<T>;
    /// A new unbounded FIFO channel.
    fn channel<T: Send + 'static>() -> (Self::Sender<T>, Self::Receiver<T>);
}

/// Unbounded `crossbeam-channel` mailboxes (the default; production).
#[derive(Clone, Copy, Debug, Default)]
pub struct CrossbeamMailbox;

impl<T: Send + 'static> MailSender<T> for crossbeam_channel::Sender<T> {
    fn send(&self, item: T) -> Result<(), T> {
        crossbeam_channel::Sender::send(self, item).map_err(|e| e.into_inner())
    }
}

impl<T: Send + 'static> MailReceiver<T> for crossbeam_channel::Receiver<T> {
    fn recv(&self) -> Option<T> {
        crossbeam_channel::Receiver::recv(self).ok()
    }
}

impl Mailbox for CrossbeamMailbox {
    type Sender<T: Send + 'static> = crossbeam_channel::Sender<T>;
    type Receiver<T: Send + 'static> = crossbeam_channel::Receiver<T>;
    fn channel<T: Send + 'static>() -> (Self::Sender<T>, Self::Receiver<T>) {
        crossbeam_channel::unbounded()
    }
}

/// Mailboxes made of a `Mutex<VecDeque>` and a `Condvar` from `crate::sync` (loom-checkable).
#[derive(Clone, Copy, Debug, Default)]
pub struct CondvarMailbox;

#[derive(Debug)]
struct Queue<T> {
    inner: Mutex<QueueState<T>>,
    ready: Condvar,
}

#[derive(Debug)]
struct QueueState<T> {
    items: VecDeque<T>,
    senders: usize,
    receiver_alive: bool,
}

/// The sending side of a [`CondvarMailbox`] channel.
#[derive(Debug)]
pub struct CondvarSender<T>(crate::sync::Arc<Queue<T>>);

/// The receiving side of a [`CondvarMailbox`] channel.
#[derive(Debug)]
pub struct CondvarReceiver<T>(crate::sync::Arc<Queue<T>>);

impl<T> Clone for CondvarSender<T> {
    fn clone(&self) -> Self {
        self.0.inner.lock().senders += 1;
        CondvarSender(self.0.clone())
    }
}

impl<T> Drop for CondvarSender<T> {
    fn drop(&mut self) {
        let last = {
            let mut q = self.0.inner.lock();
            q.senders -= 1;
            q.senders == 0
        };
        if last {
            self.0.ready.notify_all();
        }
    }
}

impl<T> Drop for CondvarReceiver<T> {
    fn drop(&mut self) {
        let mut q = self.0.inner.lock();
        q.receiver_alive = false;
        q.items.clear();
    }
}

impl<T: Send + 'static> MailSender<T> for CondvarSender<T> {
    fn send(&self, item: T) -> Result<(), T> {
        {
            let mut q = self.0.inner.lock();
            if !q.receiver_alive {
                return Err(item);
            }
            q.items.push_back(item);
        }
        self.0.ready.notify_one();
        Ok(())
    }
}

impl<T: Send + 'static> MailReceiver<T> for CondvarReceiver<T> {
    fn recv(&self) -> Option<T> {
        let mut q = self.0.inner.lock();
        loop {
            if let Some(item) = q.items.pop_front() {
                return Some(item);
            }
            if q.senders == 0 {
                return None;
            }
            self.0.ready.wait(&mut q);
        }
    }
}

impl Mailbox for CondvarMailbox {
    type Sender<T: Send + 'static> = CondvarSender<T>;
    type Receiver<T: Send + 'static> = CondvarReceiver<T>;
    fn channel<T: Send + 'static>() -> (Self::Sender<T>, Self::Receiver<T>) {
        let q = crate::sync::Arc::new(Queue {
            inner: Mutex::new(QueueState {
                items: VecDeque::new(),
                senders: 1,
                receiver_alive: true,
            }),
            ready: Condvar::new(),
        });
        (CondvarSender(q.clone()), CondvarReceiver(q))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn fifo_and_disconnect<M: Mailbox>() {
        let (tx, rx) = M::channel::<u32>();
        let tx2 = tx.clone();
        let t = std::thread::spawn(move || {
            for i in 0..1000 {
                assert!(tx2.send(i).is_ok());
            }
        });
        let mut got = Vec::new();
        for _ in 0..1000 {
            got.extend(rx.recv());
        }
        assert!(t.join().is_ok());
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        drop(tx);
        assert_eq!(rx.recv(), None);
        let (tx, rx) = M::channel::<u32>();
        drop(rx);
        assert_eq!(tx.send(7), Err(7));
    }

    #[test]
    fn crossbeam_mailbox_is_fifo() {
        fifo_and_disconnect::<CrossbeamMailbox>();
    }

    #[test]
    fn condvar_mailbox_is_fifo() {
        fifo_and_disconnect::<CondvarMailbox>();
    }
}
