//! The synchronisation primitives the runtime uses, switched between production types,
//! [loom](https://docs.rs/loom)'s model-checked ones (tokio's `src/loom` pattern) and
//! [shuttle](https://docs.rs/shuttle)'s randomly scheduled ones.
//!
//! Under neither cfg: `parking_lot`'s `Mutex`/`Condvar` (no poisoning), `std`'s `Arc`, atomics
//! and threads. Under `cfg(loom)`: `loom::sync::{Arc, Mutex, Condvar, atomic}` and
//! `loom::thread`. Under `cfg(shuttle)`: `shuttle::sync::{Arc, Mutex, Condvar, atomic}` and
//! `shuttle::thread`. Every side offers the same small API, so runtime code compiles unchanged:
//!
//! - `Mutex::new(v)`, `Mutex::lock() -> MutexGuard` (a poisoned loom or shuttle mutex is
//!   recovered: the inner value is returned, never a panic);
//! - `Condvar::new()`, `wait(&mut guard)`, `wait_for(&mut guard, Duration) -> bool` (true when
//!   the wait timed out; see below for loom and shuttle), `notify_one()`, `notify_all()`;
//! - `thread::spawn_named(name, f) -> io::Result<JoinHandle<()>>`.
//!
//! **Timed waits.** Neither model checker models time. Under loom a timed wait is an untimed
//! one (it never times out): loom explores every interleaving exhaustively and a busy loop would
//! make its state space infinite. Under shuttle a timed wait **times out at once**: it releases
//! the lock, yields to the scheduler (a scheduling point, where any other thread may run for as
//! long as the scheduler likes, and a hint to PCT to lower the waiter's priority), takes the
//! lock back and reports a timeout. That is the adversarial reading of time, "every timeout may
//! fire as early as the scheduler allows": a waiter never blocks for ever on a timed wait (so a
//! timed wait cannot turn into a false deadlock under shuttle), its caller re-checks its
//! condition as after a spurious wake-up, and the stall watchdog's two readings "an interval
//! apart" may be as close together as any schedule makes them, which is exactly the case where
//! a false stall would show. Deadlines the runtime computes from `Instant::now()` (the handles'
//! `*_timeout` calls) still read the real clock: a shuttle test that wants a replayable schedule
//! does not use them.

#[cfg(all(loom, shuttle))]
compile_error!("`--cfg loom` and `--cfg shuttle` are exclusive: pass only one");

#[cfg(not(any(loom, shuttle)))]
mod imp {
    use std::time::Duration;

    pub(crate) use std::sync::atomic;
    pub(crate) use std::sync::Arc;

    /// A mutual-exclusion lock (`parking_lot`; it cannot be poisoned).
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

    /// The guard of a locked [`Mutex`].
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        /// A new unlocked mutex holding `value`.
        pub(crate) fn new(value: T) -> Self {
            Mutex(parking_lot::Mutex::new(value))
        }

        /// Locks the mutex, blocking until it is free.
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// A condition variable (`parking_lot`).
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        /// A new condition variable.
        pub(crate) fn new() -> Self {
            Condvar(parking_lot::Condvar::new())
        }

        /// Blocks until notified (spurious wake-ups possible), releasing the lock meanwhile.
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            self.0.wait(guard);
        }

        /// Like [`Condvar::wait`] for at most `timeout`; true when the wait timed out.
        pub(crate) fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
            self.0.wait_for(guard, timeout).timed_out()
        }

        /// Wakes one waiter.
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiter.
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    pub(crate) mod thread {
        pub(crate) use std::thread::{panicking, JoinHandle};

        /// Spawns a named thread.
        pub(crate) fn spawn_named<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
        where
            F: FnOnce() + Send + 'static,
        {
            std::thread::Builder::new().name(name).spawn(f)
        }
    }
}

#[cfg(loom)]
mod imp {
    use std::ops::{Deref, DerefMut};
    use std::sync::PoisonError;
    use std::time::Duration;

    pub(crate) use loom::sync::atomic;
    pub(crate) use loom::sync::Arc;

    /// A mutual-exclusion lock (loom); poisoning is recovered.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// The guard of a locked [`Mutex`]. The option is `None` only inside [`Condvar::wait`].
    #[derive(Debug)]
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            match &self.0 {
                Some(g) => g,
                None => unreachable!("the guard is only taken during a Condvar wait"),
            }
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match &mut self.0 {
                Some(g) => g,
                None => unreachable!("the guard is only taken during a Condvar wait"),
            }
        }
    }

    impl<T> Mutex<T> {
        /// A new unlocked mutex holding `value`.
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        /// Locks the mutex, blocking until it is free.
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)))
        }
    }

    /// A condition variable (loom).
    #[derive(Debug)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        /// A new condition variable.
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }

        /// Blocks until notified, releasing the lock meanwhile.
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            if let Some(g) = guard.0.take() {
                guard.0 = Some(self.0.wait(g).unwrap_or_else(PoisonError::into_inner));
            }
        }

        /// Like [`Condvar::wait`]; loom does not model time, so it never times out.
        pub(crate) fn wait_for<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _timeout: Duration,
        ) -> bool {
            self.wait(guard);
            false
        }

        /// Wakes one waiter.
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiter.
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    pub(crate) mod thread {
        pub(crate) use loom::thread::{panicking, JoinHandle};

        /// Spawns a named thread.
        pub(crate) fn spawn_named<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
        where
            F: FnOnce() + Send + 'static,
        {
            loom::thread::Builder::new().name(name).spawn(f)
        }
    }
}

#[cfg(all(shuttle, not(loom)))]
mod imp {
    use std::fmt;
    use std::ops::{Deref, DerefMut};
    use std::sync::PoisonError;
    use std::time::Duration;

    pub(crate) use shuttle::sync::atomic;
    pub(crate) use shuttle::sync::Arc;

    /// A mutual-exclusion lock (shuttle); poisoning is recovered.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    /// The guard of a locked [`Mutex`], with the mutex it locks (to lock it again after a
    /// timed wait). The option is `None` only inside [`Condvar::wait`] and
    /// [`Condvar::wait_for`].
    #[derive(Debug)]
    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a shuttle::sync::Mutex<T>,
        guard: Option<shuttle::sync::MutexGuard<'a, T>>,
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            match &self.guard {
                Some(g) => g,
                None => unreachable!("the guard is only taken during a Condvar wait"),
            }
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match &mut self.guard {
                Some(g) => g,
                None => unreachable!("the guard is only taken during a Condvar wait"),
            }
        }
    }

    impl<T> Mutex<T> {
        /// A new unlocked mutex holding `value`.
        pub(crate) fn new(value: T) -> Self {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        /// Locks the mutex, blocking until it is free (a scheduling point).
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.0,
                guard: Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)),
            }
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    /// A condition variable (shuttle).
    #[derive(Default)]
    pub(crate) struct Condvar(shuttle::sync::Condvar);

    impl fmt::Debug for Condvar {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Condvar")
        }
    }

    impl Condvar {
        /// A new condition variable.
        pub(crate) fn new() -> Self {
            Condvar(shuttle::sync::Condvar::new())
        }

        /// Blocks until notified, releasing the lock meanwhile.
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            if let Some(g) = guard.guard.take() {
                guard.guard = Some(self.0.wait(g).unwrap_or_else(PoisonError::into_inner));
            }
        }

        /// Times out at once (shuttle has no clock): releases the lock, yields to the
        /// scheduler, takes the lock back and returns true. See the module doc.
        pub(crate) fn wait_for<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _timeout: Duration,
        ) -> bool {
            if let Some(g) = guard.guard.take() {
                drop(g);
                shuttle::thread::yield_now();
                let g = guard.mutex.lock().unwrap_or_else(PoisonError::into_inner);
                guard.guard = Some(g);
            }
            true
        }

        /// Wakes one waiter.
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiter.
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    pub(crate) mod thread {
        pub(crate) use shuttle::thread::{panicking, JoinHandle};

        /// Spawns a named thread.
        pub(crate) fn spawn_named<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
        where
            F: FnOnce() + Send + 'static,
        {
            shuttle::thread::Builder::new().name(name).spawn(f)
        }
    }
}

pub(crate) use imp::*;
