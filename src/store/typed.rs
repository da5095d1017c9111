//! One tree of the store with JSON values of one type; the critical trees' writes sealed by the sentinel.
//!
//! In memory a record is kept as its typed value (`backend::MemVal`) and read back as a clone of it; a
//! read of another type than the one written goes through the record's JSON, as a store on disk does,
//! so every read gives what the same read on disk gives.

use super::backend::{Map, MemVal, Raw, Span, Tree};
use super::{SEQ_KEY, Seal, StoreError, TreeName, disk, group, lock_seal, memory, sentinel};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::Transactional;
use std::any::Any;
use std::marker::PhantomData;
use std::path::PathBuf;

/// One tree with JSON values of type `V`.
pub struct TypedTree<V> {
    pub(super) tree: Tree,
    pub(super) seal: Seal,
    /// The state directory, named when the disk is full.
    pub(super) dir: PathBuf,
    pub(super) durability: memory::Durability,
    pub(super) name: TreeName,
    pub(super) _v: PhantomData<fn() -> V>,
}

impl<V: Serialize + DeserializeOwned + Clone + Any + Send + Sync> TypedTree<V> {
    /// Inserts or replaces. On a durable tree (orders, fills, kv, runs) the write is on disk and sealed when this
    /// returns.
    pub fn insert(&self, key: &[u8], v: &V) -> Result<(), StoreError> {
        if let Tree::Mem { .. } = &self.tree {
            self.write_mem(key, Some(MemVal::typed(v.clone())));
            return Ok(());
        }
        let bytes = serde_json::to_vec(v)
            .map_err(|e| StoreError::Encode { tree: self.name.as_str(), reason: e.to_string() })?;
        if self.name.durable() {
            return self.write_sealed(key, Some(bytes));
        }
        self.tree.insert(key, bytes).map_err(self.on_write())?;
        Ok(())
    }

    /// The record under `key`; `None` when there is none. A record that does not decode as `V` is `Corrupt`.
    pub fn get(&self, key: &[u8]) -> Result<Option<V>, StoreError> {
        self.tree.get(key, |b| self.decode(b))
    }

    /// Removes the record under `key` (nothing if there is none), sealed like `insert` on a durable tree.
    pub fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        if let Tree::Mem { .. } = &self.tree {
            self.write_mem(key, None);
            return Ok(());
        }
        if self.name.durable() {
            return self.write_sealed(key, None);
        }
        self.tree.remove(key).map_err(self.on_write())?;
        Ok(())
    }

    /// A sled error of a write: `StoreError::DiskFull` (naming the directory) when the disk is full.
    fn on_write(&self) -> impl Fn(sled::Error) -> StoreError + '_ {
        |e| disk::classify(&self.dir, StoreError::Db(e))
    }

    /// A write to a tree in memory. On a critical tree, the record and the next write sequence are set
    /// together under the sentinel's lock (what a store on disk writes in one transaction), neither
    /// flushed nor sealed in a file.
    fn write_mem(&self, key: &[u8], value: Option<MemVal>) {
        let Tree::Mem { tree, meta } = &self.tree else { return };
        let set = |tree: &mut Map| match value {
            Some(v) => drop(tree.insert(key.to_vec(), v)),
            None => drop(tree.remove(key)),
        };
        if !self.name.durable() {
            return set(&mut tree.write());
        }
        let mut seal = lock_seal(&self.seal);
        let seq = seal.mark.seq + 1;
        meta.write().insert(SEQ_KEY.to_vec(), MemVal::Bytes(seq.to_be_bytes().to_vec()));
        set(&mut tree.write());
        seal.mark.seq = seq;
    }

    /// A critical write: the record and the next write sequence in one sled transaction, flushed, then
    /// the sentinel. Critical writes are serialised by the sentinel's lock. (In memory: `write_mem`.)
    fn write_sealed(&self, key: &[u8], value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let mut seal = lock_seal(&self.seal);
        let seq = seal.mark.seq + 1;
        let (db, tree) = match &self.tree {
            Tree::Sled { tree, db } => (db, tree),
            Tree::Mem { .. } => {
                drop(seal);
                self.write_mem(key, value.map(MemVal::Bytes));
                return Ok(());
            }
        };
        let meta: &sled::Tree = db;
        (meta, tree)
            .transaction(|(meta, tree)| {
                meta.insert(SEQ_KEY, &seq.to_be_bytes())?;
                match &value {
                    Some(v) => tree.insert(key, v.as_slice())?,
                    None => tree.remove(key)?,
                };
                Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                sled::transaction::TransactionError::Storage(e) => self.on_write()(e),
                sled::transaction::TransactionError::Abort(()) => {
                    StoreError::Encode { tree: self.name.as_str(), reason: "transaction aborted".into() }
                }
            })?;
        // In a group on this thread, the group's commit flushes and seals it (`group`).
        let deferred = group::defer(&self.seal);
        if !deferred {
            db.flush().map_err(self.on_write())?;
            self.durability.count_flush();
        }
        seal.mark.seq = seq;
        seal.mark.last.insert(self.name.as_str().to_string(), sentinel::LastWrite::new(key, value.as_deref()));
        if deferred {
            return Ok(());
        }
        let path = seal.file_path().to_path_buf();
        seal.write().map_err(|source| disk::classify(&self.dir, StoreError::Sentinel { path, source }))
    }

    /// All entries with `lo <= key <= hi`, in key order.
    pub fn range(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<(Vec<u8>, V)>, StoreError> {
        self.tree.scan(Span::Range(lo, hi), false, usize::MAX, |k, v| self.entry(k, v))
    }

    /// All entries whose key starts with `prefix`, in key order (`b""`: the whole tree).
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, V)>, StoreError> {
        self.tree.scan(Span::Prefix(prefix), false, usize::MAX, |k, v| self.entry(k, v))
    }

    /// The entry with the largest key (the latest, for time-keyed trees); `None` when the tree is empty.
    pub fn last(&self) -> Result<Option<(Vec<u8>, V)>, StoreError> {
        Ok(self.last_n(1)?.pop())
    }

    /// The `n` entries with the largest keys, largest first, without reading the rest of the tree.
    pub fn last_n(&self, n: usize) -> Result<Vec<(Vec<u8>, V)>, StoreError> {
        self.tree.scan(Span::All, true, n, |k, v| self.entry(k, v))
    }

    /// The number of records in the tree.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the tree has no records.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    fn entry(&self, k: &[u8], v: Raw<'_>) -> Result<(Vec<u8>, V), StoreError> {
        Ok((k.to_vec(), self.decode(v)?))
    }

    /// A record as a `V`: a clone of a typed record of that type; otherwise decoded from its JSON.
    fn decode(&self, v: Raw<'_>) -> Result<V, StoreError> {
        if let Raw::Typed(t) = &v
            && let Some(v) = t.as_any().downcast_ref::<V>()
        {
            return Ok(v.clone());
        }
        let tree = self.name.as_str();
        serde_json::from_slice(&v.bytes(tree)?).map_err(|e| StoreError::Corrupt { tree, reason: e.to_string() })
    }
}
