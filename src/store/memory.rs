//! Stores in memory, and the count of durable flushes.
//!
//! An evaluation (a backtest, the gate's holdout runs, a search trial's validation, `bench infer`'s
//! compute figure) runs the engine over a scratch account that nothing reads after the run: it needs
//! the store's trees and semantics, not its durability. `Store::in_memory` gives exactly that: one
//! ordered map per tree (`backend`: the same keys in the same order as sled's, no page cache, no log, no
//! transaction, no background thread), gone when the last clone is dropped; no lock file, no sentinel
//! file, nothing under any state directory, and every flush a no-op. The engine's results over it equal
//! those over a store on disk, bit for bit (the same trees, the same records, the same write sequence).
//! A backup or snapshot of it is refused (`StoreError::InMemory`).
//!
//! Every durable flush of a store on disk (a critical write's, `Store::flush`) is counted, per store
//! (`Store::durable_flushes`, shared by its clones) and per thread (`flushes_on_this_thread`), so that
//! tests can say how many flushes a path makes.

use super::backend::{Db, MemDb, MemVal};
use super::{SCHEMA_KEY, SCHEMA_VERSION, Store, StoreError, sentinel};
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static THREAD_FLUSHES: Cell<u64> = const { Cell::new(0) };
}

/// How many durable flushes stores made on the calling thread so far (every store, every clone).
pub fn flushes_on_this_thread() -> u64 {
    THREAD_FLUSHES.with(Cell::get)
}

/// Whether a store flushes, and how many times it did.
#[derive(Clone)]
pub(super) struct Durability {
    in_memory: bool,
    flushes: Arc<AtomicU64>,
}

impl Durability {
    pub(super) fn on_disk() -> Durability {
        Durability { in_memory: false, flushes: Arc::new(AtomicU64::new(0)) }
    }

    pub(super) fn in_memory(&self) -> bool {
        self.in_memory
    }

    /// Records one durable flush.
    pub(super) fn count_flush(&self) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        THREAD_FLUSHES.with(|c| c.set(c.get() + 1));
    }
}

impl Store {
    /// A fresh, empty store in memory: the same trees and API as `Store::open`, with no file under any
    /// state directory, no lock, no sentinel and no flush. Gone when its last clone is dropped.
    pub fn in_memory() -> Result<Store, StoreError> {
        let db = Arc::new(MemDb::default());
        db.default.write().insert(SCHEMA_KEY.to_vec(), MemVal::Bytes(SCHEMA_VERSION.to_be_bytes().to_vec()));
        Ok(Store {
            db: Db::Mem(db),
            dir: PathBuf::from("(in memory)"),
            seal: Arc::new(std::sync::Mutex::new(sentinel::Sentinel::in_memory(sentinel::Mark::default()))),
            _lock: Arc::new(None),
            _scratch: None,
            durability: Durability { in_memory: true, flushes: Arc::new(AtomicU64::new(0)) },
        })
    }

    /// Whether this store lives in memory (`Store::in_memory`).
    pub fn is_in_memory(&self) -> bool {
        self.durability.in_memory
    }

    /// How many durable flushes this store (any of its clones) has made: 0 for a store in memory.
    pub fn durable_flushes(&self) -> u64 {
        self.durability.flushes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TreeName;

    #[test]
    fn a_store_in_memory_keeps_writes_with_no_file_and_no_flush() {
        let dir = tempfile::tempdir().unwrap();
        let before = flushes_on_this_thread();
        let mem = Store::in_memory().unwrap();
        assert!(mem.is_in_memory());
        let orders = mem.tree::<u32>(TreeName::Orders).unwrap();
        orders.insert(b"a", &7).unwrap();
        orders.insert(b"b", &8).unwrap();
        orders.remove(b"a").unwrap();
        mem.tree::<u32>(TreeName::Decisions).unwrap().insert(b"d", &9).unwrap();
        mem.flush().unwrap();
        assert_eq!(orders.get(b"b").unwrap(), Some(8));
        assert_eq!(orders.get(b"a").unwrap(), None);
        assert_eq!(mem.write_seq(), 3, "critical writes still bump the write sequence");
        assert_eq!(mem.durable_flushes(), 0);
        assert_eq!(flushes_on_this_thread(), before);
        // The same writes to a store on disk flush each critical write and the explicit flush.
        let disk = Store::open(dir.path()).unwrap();
        let orders = disk.tree::<u32>(TreeName::Orders).unwrap();
        orders.insert(b"a", &7).unwrap();
        orders.insert(b"b", &8).unwrap();
        orders.remove(b"a").unwrap();
        disk.flush().unwrap();
        assert_eq!(disk.durable_flushes(), 4);
        assert_eq!(flushes_on_this_thread(), before + 4);
        assert_eq!(disk.write_seq(), mem.write_seq());
    }

    /// Group commit: the critical writes of a group are written at once and flushed once, at its commit,
    /// then sealed (a reopen agrees with the sentinel); nested groups commit with the outermost.
    #[test]
    fn a_group_flushes_its_critical_writes_once_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        {
            let disk = Store::open(dir.path()).unwrap();
            let orders = disk.tree::<u32>(TreeName::Orders).unwrap();
            let group = disk.group();
            let inner = disk.group();
            orders.insert(b"a", &1).unwrap();
            inner.commit().unwrap();
            orders.insert(b"b", &2).unwrap();
            disk.tree::<u32>(TreeName::Kv).unwrap().insert(b"k", &3).unwrap();
            assert_eq!(orders.get(b"b").unwrap(), Some(2), "a write in a group reads back at once");
            assert_eq!(disk.durable_flushes(), 0, "nothing flushed before the commit");
            group.commit().unwrap();
            assert_eq!(disk.durable_flushes(), 1);
            assert_eq!(disk.write_seq(), 3);
            // Outside a group, each critical write flushes again.
            orders.insert(b"c", &4).unwrap();
            assert_eq!(disk.durable_flushes(), 2);
        }
        let reopened = Store::open(dir.path()).unwrap();
        assert_eq!(reopened.write_seq(), 4);
        assert_eq!(reopened.tree::<u32>(TreeName::Kv).unwrap().get(b"k").unwrap(), Some(3));
    }

    thread_local! {
        static ENCODES: Cell<u64> = const { Cell::new(0) };
    }

    /// A record that counts how many times it is written as JSON (on this thread).
    #[derive(Clone, Debug, PartialEq, serde::Deserialize)]
    struct Counted(u32);

    impl serde::Serialize for Counted {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            ENCODES.with(|c| c.set(c.get() + 1));
            s.serialize_u32(self.0)
        }
    }

    /// In memory a record is kept as its typed value: writes and reads of the same type never write JSON,
    /// on a critical tree (the write sequence still bumped) as on the others; on disk every write does.
    #[test]
    fn a_store_in_memory_keeps_records_typed_with_no_json() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Store::open(dir.path()).unwrap();
        let mem = Store::in_memory().unwrap();
        let mut encodes = Vec::new();
        for s in [&mem, &disk] {
            let before = ENCODES.with(Cell::get);
            for name in [TreeName::Orders, TreeName::Decisions] {
                let t = s.tree::<Counted>(name).unwrap();
                t.insert(b"a", &Counted(1)).unwrap();
                t.insert(b"b", &Counted(2)).unwrap();
                t.insert(b"a", &Counted(3)).unwrap();
                t.remove(b"b").unwrap();
                t.insert(b"c", &Counted(4)).unwrap();
                assert_eq!(t.get(b"a").unwrap(), Some(Counted(3)));
                assert_eq!(t.get(b"b").unwrap(), None);
                let all = t.scan_prefix(b"").unwrap();
                assert_eq!(all, [(b"a".to_vec(), Counted(3)), (b"c".to_vec(), Counted(4))]);
                assert_eq!(t.range(b"b", b"c").unwrap(), [(b"c".to_vec(), Counted(4))]);
                assert_eq!(t.last().unwrap(), Some((b"c".to_vec(), Counted(4))));
            }
            encodes.push(ENCODES.with(Cell::get) - before);
        }
        assert_eq!(encodes, [0, 8], "in memory nothing is written as JSON; on disk each insert is");
        assert_eq!(mem.write_seq(), 5, "the critical writes in memory bump the write sequence");
        assert_eq!(mem.write_seq(), disk.write_seq());
    }

    /// A record read as another type than the one written reads through its JSON, in memory as on disk:
    /// the same value where the JSON fits, the same error (naming the tree) where it does not; never a
    /// panic.
    #[test]
    fn a_record_read_as_another_type_reads_as_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Store::open(dir.path()).unwrap();
        let mem = Store::in_memory().unwrap();
        let reads = |s: &Store| {
            s.tree::<Counted>(TreeName::Kv).unwrap().insert(b"k", &Counted(7)).unwrap();
            s.tree::<Counted>(TreeName::Orders).unwrap().insert(b"o", &Counted(8)).unwrap();
            let json = s.tree::<serde_json::Value>(TreeName::Kv).unwrap().get(b"k").unwrap();
            let number = s.tree::<u64>(TreeName::Orders).unwrap().scan_prefix(b"").unwrap();
            let wrong = s.tree::<String>(TreeName::Orders).unwrap().get(b"o").unwrap_err().to_string();
            (json, number, wrong)
        };
        let (want, got) = (reads(&disk), reads(&mem));
        assert_eq!(got, want);
        assert_eq!(got.0, Some(serde_json::json!(7)));
        assert_eq!(got.1, [(b"o".to_vec(), 8)]);
        assert!(got.2.contains("orders"), "the error names the tree: {}", got.2);
    }
}
