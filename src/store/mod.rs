//! The store: one sled database holding everything tradebot knows, in typed trees.
//!
//! Trees: `bars`, `orders`, `fills`, `positions`, `equity`, `decisions`, `models`, `runs`, `kv`.
//! Keys are encoded (see `keys`) so that time ranges scan in order.
//!
//! **Durability rule.** Writes to `orders` and `fills` are flushed to disk before the call returns: once
//! `TypedTree::insert` on those trees returns `Ok`, the record survives a crash or `SIGKILL`. Other trees
//! are flushed by sled within `FLUSH_EVERY_MS` and by `Store::flush` (called at shutdown); losing their
//! last half second loses nothing that cannot be recomputed or re-fetched.
//!
//! **One owner.** `Store::open` takes an exclusive, non-blocking lock on `LOCK_FILE` in the directory;
//! a second opener (a CLI command while the daemon runs) gets `StoreError::Locked` at once, never a hang.
//!
//! **Schema.** The schema version is stored at open; a database written by a newer tradebot is refused.

pub mod keys;

use crate::domain::{Bar, Symbol, Timeframe};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

pub const SCHEMA_VERSION: u32 = 1;
pub const LOCK_FILE: &str = "tradebot.lock";
pub const DB_DIR: &str = "db";
const FLUSH_EVERY_MS: u64 = 500;
const SCHEMA_KEY: &[u8] = b"schema_version";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the store at {dir} is in use by another tradebot process{holder}: stop it first (systemctl stop tradebot), or ask it with `tradebot status`"
    )]
    Locked { dir: PathBuf, holder: String },
    #[error(
        "the store at {dir} has schema version {found}, newer than this tradebot understands ({supported}): upgrade tradebot, or point state_dir at another directory"
    )]
    NewerSchema { dir: PathBuf, found: u32, supported: u32 },
    #[error("cannot create or open the store directory {dir}: {source}")]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error("store database error: {0}")]
    Db(#[from] sled::Error),
    #[error("corrupt record in tree {tree}: {reason}")]
    Corrupt { tree: &'static str, reason: String },
    #[error("cannot encode a record for tree {tree}: {reason}")]
    Encode { tree: &'static str, reason: String },
}

/// The typed trees. `Orders` and `Fills` are durable (flushed on every write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeName {
    Bars,
    Orders,
    Fills,
    Positions,
    Equity,
    Decisions,
    Models,
    Runs,
    Kv,
}

impl TreeName {
    pub const ALL: [TreeName; 9] = [
        TreeName::Bars,
        TreeName::Orders,
        TreeName::Fills,
        TreeName::Positions,
        TreeName::Equity,
        TreeName::Decisions,
        TreeName::Models,
        TreeName::Runs,
        TreeName::Kv,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TreeName::Bars => "bars",
            TreeName::Orders => "orders",
            TreeName::Fills => "fills",
            TreeName::Positions => "positions",
            TreeName::Equity => "equity",
            TreeName::Decisions => "decisions",
            TreeName::Models => "models",
            TreeName::Runs => "runs",
            TreeName::Kv => "kv",
        }
    }

    pub fn durable(self) -> bool {
        matches!(self, TreeName::Orders | TreeName::Fills)
    }
}

/// The open database. Cheap to clone (sled handles are reference-counted); the lock is held until the
/// last clone is dropped.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    dir: PathBuf,
    _lock: std::sync::Arc<File>,
}

impl Store {
    /// Opens (creating if needed) the store under `state_dir`.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let dir = state_dir.to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Dir { dir: dir.clone(), source })?;
        let lock = lock_dir(&dir)?;
        let db = sled::Config::new().path(dir.join(DB_DIR)).flush_every_ms(Some(FLUSH_EVERY_MS)).open()?;
        check_schema(&db, &dir)?;
        Ok(Store { db, dir, _lock: std::sync::Arc::new(lock) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A typed view of one tree. Values are JSON; durability follows `TreeName::durable`.
    pub fn tree<V: Serialize + DeserializeOwned>(&self, name: TreeName) -> Result<TypedTree<V>, StoreError> {
        Ok(TypedTree { tree: self.db.open_tree(name.as_str())?, db: self.db.clone(), name, _v: PhantomData })
    }

    fn raw_tree(&self, name: TreeName) -> Result<sled::Tree, StoreError> {
        Ok(self.db.open_tree(name.as_str())?)
    }

    /// Writes bars (an existing bar at the same symbol, timeframe and time is replaced). Returns how
    /// many were new.
    pub fn put_bars(&self, bars: &[Bar]) -> Result<usize, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        let mut new = 0;
        let mut batch = sled::Batch::default();
        for b in bars {
            let k = keys::bar_key(&b.symbol, b.timeframe, b.t);
            if !tree.contains_key(&k)? {
                new += 1;
            }
            batch.insert(k, encode_bar(b).to_vec());
        }
        tree.apply_batch(batch)?;
        Ok(new)
    }

    /// Bars of one symbol and timeframe with `from <= t <= to`, in time order.
    pub fn bars(
        &self,
        symbol: &Symbol,
        tf: Timeframe,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Bar>, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        let lo = keys::bar_key(symbol, tf, from);
        let hi = keys::bar_key(symbol, tf, to);
        tree.range(lo..=hi).map(|kv| decode_bar_entry(kv?)).collect()
    }

    /// The time of the newest stored bar, if any.
    pub fn last_bar_time(&self, symbol: &Symbol, tf: Timeframe) -> Result<Option<DateTime<Utc>>, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        match tree.scan_prefix(keys::bar_prefix(symbol, tf)).next_back() {
            Some(kv) => Ok(Some(decode_bar_entry(kv?)?.t)),
            None => Ok(None),
        }
    }

    /// Number of stored bars of one symbol and timeframe.
    pub fn bar_count(&self, symbol: &Symbol, tf: Timeframe) -> Result<usize, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        let mut n = 0;
        for kv in tree.scan_prefix(keys::bar_prefix(symbol, tf)) {
            kv?;
            n += 1;
        }
        Ok(n)
    }

    /// Flushes every tree to disk. Called at shutdown.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }
}

/// One tree with JSON values of type `V`.
pub struct TypedTree<V> {
    tree: sled::Tree,
    db: sled::Db,
    name: TreeName,
    _v: PhantomData<fn() -> V>,
}

impl<V: Serialize + DeserializeOwned> TypedTree<V> {
    /// Inserts or replaces. On a durable tree (orders, fills) the write is on disk when this returns.
    pub fn insert(&self, key: &[u8], v: &V) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(v)
            .map_err(|e| StoreError::Encode { tree: self.name.as_str(), reason: e.to_string() })?;
        self.tree.insert(key, bytes)?;
        if self.name.durable() {
            self.db.flush()?;
        }
        Ok(())
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<V>, StoreError> {
        self.tree.get(key)?.map(|b| self.decode(&b)).transpose()
    }

    pub fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        self.tree.remove(key)?;
        if self.name.durable() {
            self.db.flush()?;
        }
        Ok(())
    }

    /// All entries with `lo <= key <= hi`, in key order.
    pub fn range(&self, lo: &[u8], hi: &[u8]) -> Result<Vec<(Vec<u8>, V)>, StoreError> {
        self.tree.range(lo..=hi).map(|kv| self.entry(kv?)).collect()
    }

    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, V)>, StoreError> {
        self.tree.scan_prefix(prefix).map(|kv| self.entry(kv?)).collect()
    }

    pub fn last(&self) -> Result<Option<(Vec<u8>, V)>, StoreError> {
        self.tree.last()?.map(|kv| self.entry(kv)).transpose()
    }

    /// The `n` entries with the largest keys, largest first, without reading the rest of the tree.
    pub fn last_n(&self, n: usize) -> Result<Vec<(Vec<u8>, V)>, StoreError> {
        self.tree.iter().rev().take(n).map(|kv| self.entry(kv?)).collect()
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    fn entry(&self, (k, v): (sled::IVec, sled::IVec)) -> Result<(Vec<u8>, V), StoreError> {
        Ok((k.to_vec(), self.decode(&v)?))
    }

    fn decode(&self, b: &[u8]) -> Result<V, StoreError> {
        serde_json::from_slice(b).map_err(|e| StoreError::Corrupt { tree: self.name.as_str(), reason: e.to_string() })
    }
}

/// Bars are stored compactly: o, h, l, c, v as little-endian f64 (40 bytes).
fn encode_bar(b: &Bar) -> [u8; 40] {
    let mut out = [0u8; 40];
    for (i, x) in [b.o, b.h, b.l, b.c, b.v].into_iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
    }
    out
}

fn decode_bar_entry((k, v): (sled::IVec, sled::IVec)) -> Result<Bar, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt { tree: "bars", reason };
    let (symbol, tf, t) = keys::parse_bar_key(&k).ok_or_else(|| corrupt(format!("bad key {:?}", k.as_ref())))?;
    if v.len() != 40 {
        return Err(corrupt(format!("{symbol} {t}: value has {} bytes, expected 40", v.len())));
    }
    let f = |i: usize| f64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    Bar::new(symbol.clone(), tf, t, f(0), f(1), f(2), f(3), f(4)).map_err(|e| corrupt(format!("{symbol} {t}: {e}")))
}

fn lock_dir(dir: &Path) -> Result<File, StoreError> {
    let path = dir.join(LOCK_FILE);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| StoreError::Dir { dir: dir.to_path_buf(), source })?;
    // An advisory lock (flock on Linux), released by the kernel when the process ends however it ends.
    if f.try_lock().is_err() {
        let holder = std::fs::read_to_string(&path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .map(|pid| format!(" (pid {pid})"))
            .unwrap_or_default();
        return Err(StoreError::Locked { dir: dir.to_path_buf(), holder });
    }
    let _ = f.set_len(0);
    let _ = write!(f, "{}", std::process::id());
    let _ = f.flush();
    Ok(f)
}

fn check_schema(db: &sled::Db, dir: &Path) -> Result<(), StoreError> {
    match db.get(SCHEMA_KEY)? {
        None => {
            db.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes())?;
            db.flush()?;
            Ok(())
        }
        Some(v) => {
            let b: [u8; 4] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
                tree: "default",
                reason: format!("schema_version has {} bytes, expected 4", v.len()),
            })?;
            let found = u32::from_be_bytes(b);
            if found > SCHEMA_VERSION {
                return Err(StoreError::NewerSchema { dir: dir.to_path_buf(), found, supported: SCHEMA_VERSION });
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
