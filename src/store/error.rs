//! What can go wrong with the store, each error naming the directory or tree and what to do.

use std::path::PathBuf;

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
         be a copy or a rolled-back database; {RECOVERY}", SENTINEL = super::sentinel::SENTINEL_FILE, RECOVERY = RECOVERY
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
    #[error(
        "{what} needs a store on disk, and this one is in memory (an evaluation's scratch account, gone when it ends): open the store under state_dir instead"
    )]
    InMemory { what: &'static str },
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
