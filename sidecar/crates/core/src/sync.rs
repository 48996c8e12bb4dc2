//! One policy for a poisoned lock: recover it and go on. A std `Mutex` or `RwLock` is poisoned
//! when a thread panicked while holding it; `lock().expect(..)` would then panic in every later
//! request or check that takes the lock, turning one failure into the whole process's.
//!
//! Recovering is right for every lock of the sidecar because each guards a cache, a counter, a
//! queue or a map of independent entries, and each critical section is one insert, remove, swap
//! or read: a panic inside one leaves at worst that one entry not yet written, never a value a
//! reader cannot use. Where a section writes several entries in turn (the domain health check
//! stores each domain's status as it goes), a panic between them leaves some entries from this
//! check and some from the last, each valid on its own, and the next check writes them all again.
//! No lock here guards an invariant that spans entries; one that does must not use these helpers.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] that recovers a poisoned lock (see the module's doc for why).
pub trait LockOrRecover<T: ?Sized> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockOrRecover<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`] that recover a poisoned lock (see the module's doc).
pub trait ReadWriteOrRecover<T: ?Sized> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> ReadWriteOrRecover<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_recovered_with_its_data() {
        let mutex = Mutex::new(vec![1]);
        let rwlock = RwLock::new(1);
        let _ = std::panic::catch_unwind(|| {
            let _held = mutex.lock().unwrap();
            let _written = rwlock.write().unwrap();
            panic!("poison both");
        });
        assert!(mutex.is_poisoned() && rwlock.is_poisoned());
        mutex.lock_or_recover().push(2);
        assert_eq!(*mutex.lock_or_recover(), vec![1, 2]);
        *rwlock.write_or_recover() += 1;
        assert_eq!(*rwlock.read_or_recover(), 2);
    }
}
