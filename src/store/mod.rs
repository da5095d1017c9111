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
//! validations, `bench infer`) is `Store::in_memory`: the same trees and `TypedTree` API over one
//! ordered map per tree (`backend`), with no sled, no lock, no sentinel, no file and no flush (nothing in
//! it needs to survive a crash). `Store::durable_flushes` counts the flushes a store made.
//!
//! **Schema.** The schema version is stored at open; a database written by a newer tradebot is refused.

mod backend;
pub mod backup;
mod bars;
pub mod check;
mod disk;
mod error;
mod group;
mod guard;
pub mod keys;
mod leftovers;
mod memory;
pub use error::StoreError;
pub use group::Group;
pub use memory::flushes_on_this_thread;
mod readonly;
mod restore_kill;
mod scratch;
pub mod sentinel;
pub mod snapshot;
mod typed;
pub use typed::TypedTree;

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// The database layout this build writes and reads; a store with a higher one is refused (`NewerSchema`).
pub const SCHEMA_VERSION: u32 = 1;
/// The lock file in the state directory: held (flock) by the process that has the store open, holding its pid.
pub const LOCK_FILE: &str = "tradebot.lock";
/// The folder of the state directory holding the backups.
pub const BACKUP_DIR: &str = "backups";
/// A database's trees as a backup holds them: (tree name, its (key, value) records).
type Trees = Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>;
/// The folder of the state directory holding sled's database.
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

/// The typed trees. `Orders`, `Fills`, `Kv` and `Runs` are critical (flushed and sealed on every write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeName {
    /// Market bars, keyed by symbol, timeframe and start time (`keys::bar_key`).
    Bars,
    /// The OMS's orders, keyed by client order id.
    Orders,
    /// The fills the OMS applied, keyed by client order id and cumulative filled quantity.
    Fills,
    /// The OMS's positions, by symbol.
    Positions,
    /// Backtests' equity curves, keyed `backtest/<model id>/` and the point's time.
    Equity,
    /// The engine's record of every decision (`engine::DecisionRecord`): what it decided on and what it sent.
    Decisions,
    /// No code reads or writes it today: model versions live in the registry on disk (`models::registry`).
    Models,
    /// The retrainer's run records, keyed by start time and run id.
    Runs,
    /// Small critical state under fixed keys: the kill switch, the day's opening equity, the stored calendar.
    Kv,
    /// Non-critical latest values: the last published status report and the last equity seen.
    Snapshot,
    /// Hyper-parameter searches: one record per study, its trials inside.
    Studies,
}

impl TreeName {
    /// Every tree, in declaration order (the order `tradebot store check` reports their counts in).
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

    /// The tree's name in sled, in backups and in messages (`bars`, `orders`, ...).
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

    /// Its place in `TreeName::ALL`.
    fn index(self) -> usize {
        self as usize
    }

    /// A critical tree (orders, fills, kv, runs): each write is flushed and sealed by the sentinel before it
    /// returns, and a backup copies these first, under the sentinel's lock.
    pub fn durable(self) -> bool {
        matches!(self, TreeName::Orders | TreeName::Fills | TreeName::Kv | TreeName::Runs)
    }
}

/// The open database. Cheap to clone (sled handles are reference-counted); the lock is held until the
/// last clone is dropped.
#[derive(Clone)]
pub struct Store {
    db: backend::Db,
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
            db: backend::Db::Sled(db),
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

    /// The state directory the store was opened under (`(in memory)` for a store in memory).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A typed view of one tree. Values are JSON; durability follows `TreeName::durable`.
    pub fn tree<V: Serialize + DeserializeOwned>(&self, name: TreeName) -> Result<TypedTree<V>, StoreError> {
        Ok(TypedTree {
            tree: self.db.tree(name)?,
            seal: self.seal.clone(),
            dir: self.dir.clone(),
            durability: self.durability.clone(),
            name,
            _v: PhantomData,
        })
    }

    fn raw_tree(&self, name: TreeName) -> Result<backend::Tree, StoreError> {
        self.db.tree(name)
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
mod tests;
