//! Group commit: the critical writes one thread makes inside a group (`Store::group`) are each written
//! when their call returns (the record and the next write sequence in one sled transaction, as always),
//! and flushed together, once, by `Group::commit`, which then seals the sentinel once. The engine opens a
//! group around each event, so a bar's orders, decision record and risk state cost one flush, made before
//! any of that bar's orders is handed back to be sent: what the durability rule promises of an order
//! (on disk before it leaves) holds unchanged. Other threads' writes, and writes to other stores, are not
//! deferred; `Store::flush` inside a group flushes at once. A group dropped without `commit` (a panic)
//! still flushes what it deferred, as best it can.

use super::{Seal, Store, StoreError, lock_seal};
use std::cell::Cell;

/// This thread's open group: its store (the address of the store's seal), its depth, and whether a
/// write was deferred in it.
#[derive(Clone, Copy)]
struct Open {
    store: usize,
    depth: u32,
    pending: bool,
}

thread_local! {
    static OPEN: Cell<Option<Open>> = const { Cell::new(None) };
}

fn key(seal: &Seal) -> usize {
    std::sync::Arc::as_ptr(seal) as usize
}

/// Whether a critical write to the store of `seal` on this thread is deferred to its group's commit
/// (marking the group as having something to flush).
pub(super) fn defer(seal: &Seal) -> bool {
    OPEN.with(|o| match o.get() {
        Some(g) if g.store == key(seal) => {
            o.set(Some(Open { pending: true, ..g }));
            true
        }
        _ => false,
    })
}

/// An open group on one store; `commit` flushes what was deferred in it.
#[must_use = "a group's writes are flushed by its commit"]
pub struct Group<'a> {
    store: &'a Store,
    done: bool,
}

impl Store {
    /// Opens a group commit on this thread (see `group`). Groups nest: the outermost one commits. A
    /// thread already in a group on another store keeps that one (this group then defers nothing).
    pub fn group(&self) -> Group<'_> {
        OPEN.with(|o| match o.get() {
            Some(g) if g.store == key(&self.seal) => o.set(Some(Open { depth: g.depth + 1, ..g })),
            Some(_) => {}
            None => o.set(Some(Open { store: key(&self.seal), depth: 1, pending: false })),
        });
        Group { store: self, done: false }
    }
}

impl Group<'_> {
    /// Closes the group: the outermost one flushes the writes deferred in it, once, then seals them.
    /// On `Err` they may not be on disk: nothing that depends on them must go out.
    pub fn commit(mut self) -> Result<(), StoreError> {
        self.done = true;
        self.close()
    }

    fn close(&self) -> Result<(), StoreError> {
        let pending = OPEN.with(|o| match o.get() {
            Some(g) if g.store == key(&self.store.seal) => {
                if g.depth > 1 {
                    o.set(Some(Open { depth: g.depth - 1, ..g }));
                    false
                } else {
                    o.set(None);
                    g.pending
                }
            }
            _ => false,
        });
        if pending { self.store.seal_deferred() } else { Ok(()) }
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.close() {
            log::error!("store: cannot flush the writes of an unfinished group: {e}");
        }
    }
}

impl Store {
    /// One flush for the writes deferred in a group, then the sentinel (whose mark they already moved).
    fn seal_deferred(&self) -> Result<(), StoreError> {
        let mut seal = lock_seal(&self.seal);
        self.db.flush().map_err(self.on_write())?;
        self.durability.count_flush();
        let path = seal.file_path().to_path_buf();
        seal.write().map_err(|source| super::disk::classify(&self.dir, StoreError::Sentinel { path, source }))
    }
}
