//! The store: one sled database holding everything tradebot knows, in typed trees.
//!
//! Trees: `bars`, `orders`, `fills`, `positions`, `equity`, `decisions`, `models`, `runs`, `kv`, `snapshot`
//! (the daemon's last published status, for `tradebot status` while it is stopped).
//! Keys are encoded (see `keys`) so that time ranges scan in order.
//!
//! **Durability rule.** Writes to the critical trees (`orders`, `fills`, `kv`: the kill switch and the
//! day's opening equity, `runs`: retrain records, written at a run's start and end) are flushed to disk
//! before the call returns: once `TypedTree::insert` on those trees returns `Ok`, the record survives a
//! crash or `SIGKILL`; inside a group commit (`Store::group`, `group`) the writes of one thread are
//! flushed together, once, when the group commits. Other trees are flushed by sled within
//! `FLUSH_EVERY_MS` and by `Store::flush` (called at shutdown); losing their last half second loses
//! nothing that cannot be recomputed or re-fetched.
//!
//! **Rollback and damage are refused.** Each critical write also bumps a write sequence in the database
//! (in the same sled transaction) and, once flushed, in the sentinel file beside it (`sentinel`), with
//! the key and checksum of the write. At open, a database behind its sentinel, one whose latest critical
//! records differ from it, one sled cannot read (sled's panics are caught, `guard`), or one with a
//! corrupt critical record is refused with `StoreError::is_damage` and the recovery steps (`check`,
//! `backup`: `tradebot store check|backup|restore|reseal`).
//!
//! **No wedge, one check.** Every open reads every record (`check::scan_all`, the check of `tradebot store
//! check`), so every command refuses the same damage; what an interrupted start left is cleared first
//! (`leftovers`); a full disk is `StoreError::DiskFull` (exit `EX_DISK_FULL`, `disk`). Read-only commands
//! open a private copy (`Store::open_read_only`, `readonly`) and never change a file of the store.
//!
//! **One owner.** `Store::open` takes an exclusive, non-blocking lock on `LOCK_FILE` in the directory;
//! a second opener (a CLI command while the daemon runs) gets `StoreError::Locked` at once, never a hang.
//!
//! **In memory.** An evaluation's scratch account (backtests, the gate's holdout runs, search
//! validations, `bench infer`) is `Store::in_memory`: the same trees and `TypedTree` API over a
//! temporary sled database, with no lock, no sentinel, no file under any state directory and no flush
//! (nothing in it needs to survive a crash). `Store::durable_flushes` counts the flushes a store made.
//!
//! **Schema.** The schema version is stored at open; a database written by a newer tradebot is refused.

pub mod backup;
pub mod check;
mod disk;
mod group;
mod guard;
pub mod keys;
mod leftovers;
mod memory;
pub use group::Group;
pub use memory::flushes_on_this_thread;
mod readonly;
mod restore_kill;
mod scratch;
pub mod sentinel;
pub mod snapshot;

use crate::domain::{Bar, Symbol, Timeframe};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::Transactional;
use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

pub const SCHEMA_VERSION: u32 = 1;
pub const LOCK_FILE: &str = "tradebot.lock";
/// The folder of the state directory holding the backups.
pub const BACKUP_DIR: &str = "backups";
/// A database's trees as a backup holds them: (tree name, its (key, value) records).
type Trees = Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>;
pub const DB_DIR: &str = "db";
const FLUSH_EVERY_MS: u64 = 500;
const SCHEMA_KEY: &[u8] = b"schema_version";
const SEQ_KEY: &[u8] = b"write_seq";
/// The exit code for a store refused as damaged or rolled back (EX_DATAERR): systemd does not restart
/// the unit into it (`RestartPreventExitStatus`).
pub const EX_STORE: u8 = 65;
/// The exit code for a start refused because the disk holding the store is full (EX_IOERR): the store is
/// fine, and the next start after space is freed works.
pub const EX_DISK_FULL: u8 = 74;
/// sled's page cache, in MiB, unless `set_cache_mb` says otherwise (`[store] cache_mb`).
pub const DEFAULT_CACHE_MB: u64 = 64;
static CACHE_MB: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(DEFAULT_CACHE_MB);

/// Sets sled's page cache size (MiB) for the stores this process opens from now on (`[store] cache_mb`).
pub fn set_cache_mb(mb: u64) {
    CACHE_MB.store(mb.max(1), std::sync::atomic::Ordering::Relaxed);
}

const RECOVERY: &str = "tradebot did not use it. To recover: stop tradebot; `tradebot store check --config FILE` says \
what is wrong; `tradebot store restore --config FILE` puts back the newest backup (taken before each retrain, \
under <state_dir>/backups; orders and positions since then are re-adopted from the broker at the next start); \
or, to accept the database as it is now, `tradebot store reseal --config FILE`";

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
    #[error("the store at {dir} cannot be read ({detail}); {RECOVERY}", RECOVERY = RECOVERY)]
    Unreadable { dir: PathBuf, detail: String },
    #[error(
        "the store at {dir} was rolled back: the database has written {db_seq} critical records but its sentinel \
         saw {sentinel_seq} (a truncated or replaced database); {RECOVERY}", RECOVERY = RECOVERY
    )]
    RolledBack { dir: PathBuf, db_seq: u64, sentinel_seq: u64 },
    #[error("the store at {dir} is damaged: {detail}; {RECOVERY}", RECOVERY = RECOVERY)]
    Damaged { dir: PathBuf, detail: String },
    #[error(
        "the store at {dir} has no readable sentinel ({SENTINEL}) but has written {db_seq} critical records: it may \
         be a copy or a rolled-back database; {RECOVERY}", SENTINEL = sentinel::SENTINEL_FILE, RECOVERY = RECOVERY
    )]
    NoSentinel { dir: PathBuf, db_seq: u64 },
    #[error("cannot write the store's sentinel {path}: {source}")]
    Sentinel { path: PathBuf, source: std::io::Error },
    #[error(
        "the disk holding the store at {dir} is full ({free} free): tradebot stopped (the store is not \
         damaged); free some space there (old backups under {dir}/backups, logs), then start again ({detail})"
    )]
    DiskFull { dir: PathBuf, free: String, detail: String },
    #[error(
        "no room in {dir} for a private copy of the database ({free} free; the database takes {size}): the \
         store is untouched; free some space there, or point TMPDIR at a disk with room ({detail})"
    )]
    NoRoomForCopy { dir: PathBuf, free: String, size: String, detail: String },
    #[error("backup {path}: {detail}")]
    Backup { path: PathBuf, detail: String },
    #[error("corrupt record in tree {tree}: {reason}")]
    Corrupt { tree: &'static str, reason: String },
    #[error("cannot encode a record for tree {tree}: {reason}")]
    Encode { tree: &'static str, reason: String },
}

impl StoreError {
    /// A store refused because it is damaged or behind its sentinel (exit `EX_STORE`).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            StoreError::Unreadable { .. }
                | StoreError::RolledBack { .. }
                | StoreError::Damaged { .. }
                | StoreError::NoSentinel { .. }
                | StoreError::Corrupt { .. }
        )
    }

    /// A start refused because the disk is full, or a read-only command's copy of the database finding no
    /// room in the temporary directory (exit `EX_DISK_FULL`).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StoreError::DiskFull { .. } | StoreError::NoRoomForCopy { .. })
    }
}

/// The typed trees. `Orders`, `Fills`, `Kv` and `Runs` are critical (flushed and sealed on every write).
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
    Snapshot,
    /// Hyper-parameter searches: one record per study, its trials inside.
    Studies,
}

impl TreeName {
    pub const ALL: [TreeName; 11] = [
        TreeName::Bars,
        TreeName::Orders,
        TreeName::Fills,
        TreeName::Positions,
        TreeName::Equity,
        TreeName::Decisions,
        TreeName::Models,
        TreeName::Runs,
        TreeName::Kv,
        TreeName::Snapshot,
        TreeName::Studies,
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
            TreeName::Snapshot => "snapshot",
            TreeName::Studies => "studies",
        }
    }

    pub fn durable(self) -> bool {
        matches!(self, TreeName::Orders | TreeName::Fills | TreeName::Kv | TreeName::Runs)
    }
}

/// The open database. Cheap to clone (sled handles are reference-counted); the lock is held until the
/// last clone is dropped.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    dir: PathBuf,
    seal: Seal,
    _lock: std::sync::Arc<Option<File>>,
    /// A read-only store's private copy of the database, removed with the last clone.
    _scratch: Option<std::sync::Arc<scratch::Scratch>>,
    durability: memory::Durability,
}

type Seal = std::sync::Arc<std::sync::Mutex<sentinel::Sentinel>>;

impl Store {
    /// Opens (creating if needed) the store under `state_dir`. A damaged or rolled-back store is refused
    /// (`StoreError::is_damage`) after the same check as `tradebot store check` (every record of every
    /// tree decodes; the sentinel agrees); a full disk is `StoreError::DiskFull`. What an interrupted start
    /// left is cleared first (`leftovers`).
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        Store::open_writable(state_dir).map_err(|e| disk::classify(state_dir, e))
    }

    fn open_writable(state_dir: &Path) -> Result<Store, StoreError> {
        let dir = state_dir.to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Dir { dir: dir.clone(), source })?;
        let lock = lock_dir(&dir)?;
        leftovers::clear_state_dir(&dir);
        leftovers::clear_db(&dir.join(DB_DIR));
        let found = sentinel::Sentinel::read(&dir)
            .map_err(|source| StoreError::Sentinel { path: sentinel::Sentinel::path(&dir), source })?;
        let result = guard::guarded(&dir, || {
            let db = open_db(&dir.join(DB_DIR))?;
            let schema = check_schema(&db, &dir)?;
            check::scan_all(&db)?;
            if schema.is_none() {
                db.insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes())?;
                db.flush()?;
            }
            Ok(db)
        });
        let db = match result {
            Ok(db) => db,
            Err(e) => {
                // A failed start (a full disk) may leave a half-written snapshot: gone now, not at the next start.
                leftovers::clear_db(&dir.join(DB_DIR));
                return Err(e);
            }
        };
        let mark = check::verify_against(&db, &dir, found)?;
        let seal = sentinel::Sentinel::create(&dir, mark)
            .map_err(|source| StoreError::Sentinel { path: sentinel::Sentinel::path(&dir), source })?;
        Ok(Store {
            db,
            dir,
            seal: std::sync::Arc::new(std::sync::Mutex::new(seal)),
            _lock: std::sync::Arc::new(Some(lock)),
            _scratch: None,
            durability: memory::Durability::on_disk(),
        })
    }

    /// The write sequence of the critical trees (what the sentinel guards).
    pub fn write_seq(&self) -> u64 {
        lock_seal(&self.seal).mark.seq
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A typed view of one tree. Values are JSON; durability follows `TreeName::durable`.
    pub fn tree<V: Serialize + DeserializeOwned>(&self, name: TreeName) -> Result<TypedTree<V>, StoreError> {
        Ok(TypedTree {
            tree: self.db.open_tree(name.as_str())?,
            db: self.db.clone(),
            seal: self.seal.clone(),
            dir: self.dir.clone(),
            durability: self.durability.clone(),
            name,
            _v: PhantomData,
        })
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
            if !tree.contains_key(&k).map_err(self.on_write())? {
                new += 1;
            }
            batch.insert(k, encode_bar(b).to_vec());
        }
        tree.apply_batch(batch).map_err(self.on_write())?;
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

    /// Flushes every tree to disk. Called at shutdown. A store in memory has nothing to flush.
    pub fn flush(&self) -> Result<(), StoreError> {
        if self.durability.in_memory() {
            return Ok(());
        }
        self.db.flush().map_err(self.on_write())?;
        self.durability.count_flush();
        Ok(())
    }

    /// A sled error of a write: `StoreError::DiskFull` (naming the directory) when the disk is full.
    fn on_write(&self) -> impl Fn(sled::Error) -> StoreError + '_ {
        |e| disk::classify(&self.dir, StoreError::Db(e))
    }
}

/// One tree with JSON values of type `V`.
pub struct TypedTree<V> {
    tree: sled::Tree,
    db: sled::Db,
    seal: Seal,
    /// The state directory, named when the disk is full.
    dir: PathBuf,
    durability: memory::Durability,
    name: TreeName,
    _v: PhantomData<fn() -> V>,
}

impl<V: Serialize + DeserializeOwned> TypedTree<V> {
    /// Inserts or replaces. On a durable tree (orders, fills) the write is on disk when this returns.
    pub fn insert(&self, key: &[u8], v: &V) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(v)
            .map_err(|e| StoreError::Encode { tree: self.name.as_str(), reason: e.to_string() })?;
        if self.name.durable() {
            return self.write_sealed(key, Some(bytes));
        }
        self.tree.insert(key, bytes).map_err(self.on_write())?;
        Ok(())
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<V>, StoreError> {
        self.tree.get(key)?.map(|b| self.decode(&b)).transpose()
    }

    pub fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
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

    /// A critical write: the record and the next write sequence in one sled transaction, flushed, then
    /// the sentinel. Critical writes are serialised by the sentinel's lock. In memory: the same
    /// transaction and sequence, neither flushed nor sealed in a file.
    fn write_sealed(&self, key: &[u8], value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let mut seal = lock_seal(&self.seal);
        let seq = seal.mark.seq + 1;
        let meta: &sled::Tree = &self.db;
        (meta, &self.tree)
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
        if self.durability.in_memory() {
            seal.mark.seq = seq;
            return Ok(());
        }
        // In a group on this thread, the group's commit flushes and seals it (`group`).
        let deferred = group::defer(&self.seal);
        if !deferred {
            self.db.flush().map_err(self.on_write())?;
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

fn lock_seal(seal: &Seal) -> std::sync::MutexGuard<'_, sentinel::Sentinel> {
    // A panic while holding it left the mark as it was before that write: still a valid lower bound.
    seal.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens the database. Called with the state directory's lock held, so no other store has it open; a
/// store of this process dropped a moment ago may still be releasing sled's own file lock (its flusher
/// thread ends after the drop): that lock is waited for, up to two seconds.
fn open_db(path: &Path) -> Result<sled::Db, StoreError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let cache = CACHE_MB.load(std::sync::atomic::Ordering::Relaxed).saturating_mul(1 << 20);
        match sled::Config::new().path(path).cache_capacity(cache).flush_every_ms(Some(FLUSH_EVERY_MS)).open() {
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::Other
                    && e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return Ok(r?),
        }
    }
}

/// The write sequence stored in the database (0 for a store written before sentinels).
fn db_seq(db: &sled::Db) -> Result<u64, StoreError> {
    match db.get(SEQ_KEY)? {
        None => Ok(0),
        Some(v) => {
            let b: [u8; 8] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
                tree: "default",
                reason: format!("write_seq has {} bytes, expected 8", v.len()),
            })?;
            Ok(u64::from_be_bytes(b))
        }
    }
}

/// The store under `dir` is locked by another process: `StoreError::Locked`, naming the pid its lock file
/// holds (the owner writes it there).
fn locked(dir: &Path) -> StoreError {
    let holder = std::fs::read_to_string(dir.join(LOCK_FILE))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default();
    StoreError::Locked { dir: dir.to_path_buf(), holder }
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
        return Err(locked(dir));
    }
    let _ = f.set_len(0);
    let _ = write!(f, "{}", std::process::id());
    let _ = f.flush();
    Ok(f)
}

/// The stored schema version (`None`: a new database, to be stamped); a newer one is refused. Writes nothing.
fn check_schema(db: &sled::Db, dir: &Path) -> Result<Option<u32>, StoreError> {
    match db.get(SCHEMA_KEY)? {
        None => Ok(None),
        Some(v) => {
            let b: [u8; 4] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
                tree: "default",
                reason: format!("schema_version has {} bytes, expected 4", v.len()),
            })?;
            let found = u32::from_be_bytes(b);
            if found > SCHEMA_VERSION {
                return Err(StoreError::NewerSchema { dir: dir.to_path_buf(), found, supported: SCHEMA_VERSION });
            }
            Ok(Some(found))
        }
    }
}

#[cfg(test)]
mod damage_tests;
#[cfg(test)]
mod start_tests;
#[cfg(test)]
mod tests;
