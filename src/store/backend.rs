//! Where a store's records live: sled's database on disk, or, for a store in memory (`Store::in_memory`),
//! one ordered map per tree. Both hold raw bytes under byte keys in the same order (sled orders keys
//! lexicographically, as `BTreeMap<Vec<u8>, _>` does), so every read (a range, a prefix scan, the last
//! entries) sees the same records in the same order whichever holds them.
//!
//! A record written through a typed tree into memory is kept as its typed value (`MemVal::Typed`), not
//! JSON: a read of the same type clones it back, and bytes are made (the same JSON a store on disk holds)
//! only where a reader needs them (a read of another type, a raw scan).
//!
//! The maps are what an evaluation's scratch account needs and no more: no page cache, no log, no
//! transaction machinery (a store in memory has one writer of its critical trees at a time, under the
//! sentinel's lock, so the record and the write sequence are set together without one), no file.

use super::{StoreError, TreeName};
use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(super) type Map = BTreeMap<Vec<u8>, MemVal>;

/// A typed record kept in memory: its value, and how to write it as the JSON a store on disk holds.
pub(super) trait Stored: Any + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn to_json(&self) -> Result<Vec<u8>, serde_json::Error>;
}

impl<V: serde::Serialize + Any + Send + Sync> Stored for V {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }
}

/// One value of a tree in memory: bytes (a raw write, the default tree's counters) or a typed record.
#[derive(Clone)]
pub(super) enum MemVal {
    Bytes(Vec<u8>),
    Typed(Arc<dyn Stored>),
}

/// One value as a reader sees it: bytes (every value on disk), or a typed record in memory.
pub(super) enum Raw<'v> {
    Bytes(&'v [u8]),
    Typed(&'v dyn Stored),
}

impl Raw<'_> {
    /// The value as bytes: a typed record is written as JSON here (the bytes a store on disk holds).
    pub(super) fn bytes(&self, tree: &'static str) -> Result<Cow<'_, [u8]>, StoreError> {
        match self {
            Raw::Bytes(b) => Ok(Cow::Borrowed(b)),
            Raw::Typed(v) => {
                v.to_json().map(Cow::Owned).map_err(|e| StoreError::Encode { tree, reason: e.to_string() })
            }
        }
    }
}

impl MemVal {
    /// A typed record, kept as it is.
    pub(super) fn typed<V: Stored>(v: V) -> MemVal {
        MemVal::Typed(Arc::new(v))
    }

    fn raw(&self) -> Raw<'_> {
        match self {
            MemVal::Bytes(b) => Raw::Bytes(b),
            MemVal::Typed(v) => Raw::Typed(v.as_ref()),
        }
    }
}

/// One tree in memory, shared by the store's clones and the typed trees opened on it.
#[derive(Clone, Default)]
pub(super) struct MemTree(Arc<RwLock<Map>>);

impl MemTree {
    // A panic while holding the lock leaves a map that is still a map: it is read on.
    fn read(&self) -> RwLockReadGuard<'_, Map> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Map> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The trees of a store in memory: sled's default tree (the schema version, the write sequence) and one
/// per `TreeName`.
#[derive(Default)]
pub(super) struct MemDb {
    pub(super) default: MemTree,
    trees: [MemTree; TreeName::ALL.len()],
}

/// A store's database.
#[derive(Clone)]
pub(super) enum Db {
    Sled(sled::Db),
    Mem(Arc<MemDb>),
}

impl Db {
    pub(super) fn tree(&self, name: TreeName) -> Result<Tree, StoreError> {
        Ok(match self {
            Db::Sled(db) => Tree::Sled { tree: db.open_tree(name.as_str())?, db: db.clone() },
            Db::Mem(m) => Tree::Mem { tree: m.trees[name.index()].clone(), meta: m.default.clone() },
        })
    }

    /// sled's database, for what only a store on disk does (a backup, a snapshot); `what` names it in
    /// the error of a store in memory.
    pub(super) fn sled(&self, what: &'static str) -> Result<&sled::Db, StoreError> {
        match self {
            Db::Sled(db) => Ok(db),
            Db::Mem(_) => Err(StoreError::InMemory { what }),
        }
    }

    /// Flushes sled's database; a store in memory has nothing to flush.
    pub(super) fn flush(&self) -> Result<(), sled::Error> {
        match self {
            Db::Sled(db) => db.flush().map(drop),
            Db::Mem(_) => Ok(()),
        }
    }
}

/// Which entries of a tree a scan reads.
#[derive(Clone, Copy)]
pub(super) enum Span<'k> {
    All,
    Prefix(&'k [u8]),
    /// `lo <= key <= hi`.
    Range(&'k [u8], &'k [u8]),
}

/// One tree of a store's database, with the database's default tree (the write sequence's).
#[derive(Clone)]
pub(super) enum Tree {
    Sled { tree: sled::Tree, db: sled::Db },
    Mem { tree: MemTree, meta: MemTree },
}

impl Tree {
    /// The value under `key`, given to `f`.
    pub(super) fn get<T>(
        &self,
        key: &[u8],
        f: impl FnOnce(Raw<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        match self {
            Tree::Sled { tree: t, .. } => t.get(key)?.map(|v| f(Raw::Bytes(&v))).transpose(),
            Tree::Mem { tree: t, .. } => t.read().get(key).map(|v| f(v.raw())).transpose(),
        }
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> Result<bool, sled::Error> {
        match self {
            Tree::Sled { tree: t, .. } => t.contains_key(key),
            Tree::Mem { tree: t, .. } => Ok(t.read().contains_key(key)),
        }
    }

    pub(super) fn insert(&self, key: &[u8], value: Vec<u8>) -> Result<(), sled::Error> {
        match self {
            Tree::Sled { tree: t, .. } => t.insert(key, value).map(drop),
            Tree::Mem { tree: t, .. } => {
                t.write().insert(key.to_vec(), MemVal::Bytes(value));
                Ok(())
            }
        }
    }

    pub(super) fn remove(&self, key: &[u8]) -> Result<(), sled::Error> {
        match self {
            Tree::Sled { tree: t, .. } => t.remove(key).map(drop),
            Tree::Mem { tree: t, .. } => {
                t.write().remove(key);
                Ok(())
            }
        }
    }

    /// Writes all of `entries` at once (sled: one batch, applied atomically).
    pub(super) fn insert_all(&self, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<(), sled::Error> {
        match self {
            Tree::Sled { tree: t, .. } => {
                let mut batch = sled::Batch::default();
                for (k, v) in entries {
                    batch.insert(k, v);
                }
                t.apply_batch(batch)
            }
            Tree::Mem { tree: t, .. } => {
                t.write().extend(entries.into_iter().map(|(k, v)| (k, MemVal::Bytes(v))));
                Ok(())
            }
        }
    }

    /// At most `limit` entries of `span`, in key order (largest first when `rev`), each through `f`.
    pub(super) fn scan<T>(
        &self,
        span: Span<'_>,
        rev: bool,
        limit: usize,
        mut f: impl FnMut(&[u8], Raw<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        match self {
            Tree::Sled { tree: t, .. } => {
                let it = match span {
                    Span::All => t.iter(),
                    Span::Prefix(p) => t.scan_prefix(p),
                    Span::Range(lo, hi) => t.range(lo..=hi),
                };
                let it: Box<dyn Iterator<Item = _>> = if rev { Box::new(it.rev()) } else { Box::new(it) };
                for kv in it.take(limit) {
                    let (k, v) = kv?;
                    out.push(f(&k, Raw::Bytes(&v))?);
                }
            }
            Tree::Mem { tree: t, .. } => {
                let map = t.read();
                let end = match span {
                    Span::Prefix(p) => prefix_end(p),
                    _ => None,
                };
                let bounds: (Bound<&[u8]>, Bound<&[u8]>) = match span {
                    Span::All => (Bound::Unbounded, Bound::Unbounded),
                    Span::Prefix(p) => (Bound::Included(p), end.as_deref().map_or(Bound::Unbounded, Bound::Excluded)),
                    // sled reads nothing there; `BTreeMap::range` would panic.
                    Span::Range(lo, hi) if lo > hi => return Ok(out),
                    Span::Range(lo, hi) => (Bound::Included(lo), Bound::Included(hi)),
                };
                let it = map.range::<[u8], _>(bounds);
                let it: Box<dyn Iterator<Item = _>> = if rev { Box::new(it.rev()) } else { Box::new(it) };
                for (k, v) in it.take(limit) {
                    out.push(f(k, v.raw())?);
                }
            }
        }
        Ok(out)
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            Tree::Sled { tree: t, .. } => t.is_empty(),
            Tree::Mem { tree: t, .. } => t.read().is_empty(),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Tree::Sled { tree: t, .. } => t.len(),
            Tree::Mem { tree: t, .. } => t.read().len(),
        }
    }
}

/// The smallest key above every key starting with `p` (`None`: there is none, `p` is all 0xff).
fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut end = p.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{Store, TreeName};

    /// The same writes to a store on disk (sled) and one in memory (the maps) read back the same, in the
    /// same order, through every read of `TypedTree`, the edges included: keys of 0xff bytes, a prefix
    /// that is a key, an empty range; and a store in memory holds no sled database at all.
    #[test]
    fn a_store_in_memory_reads_as_sled_does_with_no_sled_database() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Store::open(dir.path()).unwrap();
        let mem = Store::in_memory().unwrap();
        assert!(matches!(mem.db, super::Db::Mem(_)), "a store in memory is not a sled database");
        let keys: [&[u8]; 9] = [b"b", b"a", b"ab", b"a\xff", b"a\xff\xff", b"\xff", b"\xff\x00", b"", b"b\x00"];
        for s in [&disk, &mem] {
            for name in [TreeName::Decisions, TreeName::Orders] {
                let t = s.tree::<u32>(name).unwrap();
                assert!(t.is_empty());
                for (i, k) in keys.iter().enumerate() {
                    t.insert(k, &(i as u32)).unwrap();
                }
                t.insert(b"ab", &99).unwrap();
                t.remove(b"b").unwrap();
                t.remove(b"never written").unwrap();
            }
        }
        let reads = |s: &Store, name| {
            let t = s.tree::<u32>(name).unwrap();
            let spans: [(&[u8], &[u8]); 4] = [(b"a", b"b"), (b"a\xff", b"\xff"), (b"b", b"a"), (b"", b"")];
            let prefixes: [&[u8]; 5] = [b"", b"a", b"a\xff", b"\xff", b"c"];
            (
                spans.map(|(lo, hi)| t.range(lo, hi).unwrap()),
                prefixes.map(|p| t.scan_prefix(p).unwrap()),
                (t.last().unwrap(), t.last_n(3).unwrap(), t.last_n(0).unwrap(), t.last_n(100).unwrap()),
                (t.get(b"ab").unwrap(), t.get(b"b").unwrap(), t.len(), t.is_empty()),
            )
        };
        for name in [TreeName::Decisions, TreeName::Orders] {
            let (want, got) = (reads(&disk, name), reads(&mem, name));
            assert_eq!(got, want, "{name:?}");
            assert_eq!(
                got.2.1.iter().map(|(k, _)| k.as_slice()).collect::<Vec<_>>(),
                [&b"\xff\x00"[..], b"\xff", b"b\x00"]
            );
            assert_eq!(got.3, (Some(99), None, 8, false));
        }
        assert_eq!(mem.write_seq(), disk.write_seq(), "the critical writes bump the same sequence");
        assert_eq!(mem.write_seq(), 12);
        for (i, name) in TreeName::ALL.into_iter().enumerate() {
            assert_eq!(name.index(), i, "{name:?}");
        }
    }

    /// What only a store on disk can do is refused in memory, naming it, before any file is made.
    #[test]
    fn a_backup_or_snapshot_of_a_store_in_memory_is_refused_with_no_file() {
        let mem = Store::in_memory().unwrap();
        let backup = mem.backup().expect_err("a store in memory has nothing on disk to back up");
        let snapshot = mem.snapshot().expect_err("nor to snapshot");
        assert!(backup.to_string().starts_with("a backup needs a store on disk"), "{backup}");
        assert!(snapshot.to_string().starts_with("a snapshot needs a store on disk"), "{snapshot}");
        assert!(!mem.dir().exists(), "nothing was made at {}", mem.dir().display());
    }
}
