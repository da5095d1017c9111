//! What can go wrong with the store, each error naming the directory or tree and what to do.

use std::path::PathBuf;

const RECOVERY: &str = "tradebot did not use it. To recover: stop tradebot; `tradebot store check --config FILE` says \
what is wrong; `tradebot store restore --config FILE` puts back the newest backup (taken before each retrain, \
under <state_dir>/backups; orders and positions since then are re-adopted from the broker at the next start); \
or, to accept the database as it is now, `tradebot store reseal --config FILE`";

/// Why the store could not be opened, read, written, checked, backed up or restored; each message names the
/// directory, file or tree and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process holds the store directory's lock.
    #[error(
        "the store at {dir} is in use by another tradebot process{holder}: stop it first (systemctl stop tradebot), or ask it with `tradebot status`"
    )]
    Locked {
        /// The store directory (`state_dir`).
        dir: PathBuf,
        /// ` (pid N)` from the lock file when the holder wrote one there, else empty.
        holder: String,
    },
    /// The database was written by a newer tradebot, with a schema this one does not know.
    #[error(
        "the store at {dir} has schema version {found}, newer than this tradebot understands ({supported}): upgrade tradebot, or point state_dir at another directory"
    )]
    NewerSchema {
        /// The store directory.
        dir: PathBuf,
        /// The schema version recorded in the database.
        found: u32,
        /// The newest schema version this build reads.
        supported: u32,
    },
    /// The store directory (or a private copy's directory) could not be created or opened.
    #[error("cannot create or open the store directory {dir}: {source}")]
    Dir {
        /// The directory that could not be created or opened.
        dir: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// sled itself failed (I/O or its own corruption check) outside the cases classified below.
    #[error("store database error: {0}")]
    Db(#[from] sled::Error),
    /// The database could not be opened or read: refused as damage, with the recovery steps.
    #[error("the store at {dir} cannot be read ({detail}); {RECOVERY}", RECOVERY = RECOVERY)]
    Unreadable {
        /// The store directory.
        dir: PathBuf,
        /// What failed, in sled's or the operating system's words.
        detail: String,
    },
    /// The database has fewer critical writes than the sentinel beside it recorded: an older or truncated
    /// copy, refused so that orders and the kill switch are not silently lost.
    #[error(
        "the store at {dir} was rolled back: the database has written {db_seq} critical records but its sentinel \
         saw {sentinel_seq} (a truncated or replaced database); {RECOVERY}", RECOVERY = RECOVERY
    )]
    RolledBack {
        /// The store directory.
        dir: PathBuf,
        /// The critical-write sequence found in the database.
        db_seq: u64,
        /// The (higher) critical-write sequence the sentinel file recorded.
        sentinel_seq: u64,
    },
    /// At the sentinel's own sequence, a last critical write the sentinel recorded differs from the database's,
    /// or the database directory is missing.
    #[error("the store at {dir} is damaged: {detail}; {RECOVERY}", RECOVERY = RECOVERY)]
    Damaged {
        /// The store directory.
        dir: PathBuf,
        /// What disagrees, for a person.
        detail: String,
    },
    /// The sentinel file is missing or unreadable although the database has critical writes: it may be a copy
    /// or a rolled-back database, so it is refused.
    #[error(
        "the store at {dir} has no readable sentinel ({SENTINEL}) but has written {db_seq} critical records: it may \
         be a copy or a rolled-back database; {RECOVERY}", SENTINEL = super::sentinel::SENTINEL_FILE, RECOVERY = RECOVERY
    )]
    NoSentinel {
        /// The store directory.
        dir: PathBuf,
        /// The critical-write sequence found in the database.
        db_seq: u64,
    },
    /// The sentinel file could not be read or written (not damage: an I/O failure on that file).
    #[error("cannot write the store's sentinel {path}: {source}")]
    Sentinel {
        /// The sentinel file's path.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A write failed because the store's disk is full; the store is not damaged.
    #[error(
        "the disk holding the store at {dir} is full ({free} free): tradebot stopped (the store is not \
         damaged); free some space there (old backups under {dir}/backups, logs), then start again ({detail})"
    )]
    DiskFull {
        /// The store directory.
        dir: PathBuf,
        /// The free space left on that disk, human-readable (`unknown` when it cannot be read).
        free: String,
        /// The failed write's own error.
        detail: String,
    },
    /// A read-only command found no room in the temporary directory for its private copy of the database;
    /// the store itself is untouched.
    #[error(
        "no room in {dir} for a private copy of the database ({free} free; the database takes {size}): the \
         store is untouched; free some space there, or point TMPDIR at a disk with room ({detail})"
    )]
    NoRoomForCopy {
        /// The temporary directory the copy was going to.
        dir: PathBuf,
        /// The free space there, human-readable (`unknown` when it cannot be read).
        free: String,
        /// The database's size on disk, human-readable.
        size: String,
        /// The failed copy's own error.
        detail: String,
    },
    /// A backup could not be written, or a backup file could not be read or is not a valid backup.
    #[error("backup {path}: {detail}")]
    Backup {
        /// The backup file.
        path: PathBuf,
        /// What went wrong with it.
        detail: String,
    },
    /// An operation that needs files (backup, check, restore, ...) was asked of an in-memory store.
    #[error(
        "{what} needs a store on disk, and this one is in memory (an evaluation's scratch account, gone when it ends): open the store under state_dir instead"
    )]
    InMemory {
        /// The operation refused, as the message names it.
        what: &'static str,
    },
    /// A stored record's key or value does not decode as its tree's type.
    #[error("corrupt record in tree {tree}: {reason}")]
    Corrupt {
        /// The tree's name (`bars`, `orders`, ...).
        tree: &'static str,
        /// What does not decode, and which record.
        reason: String,
    },
    /// A value could not be serialized for writing; nothing was written.
    #[error("cannot encode a record for tree {tree}: {reason}")]
    Encode {
        /// The tree's name.
        tree: &'static str,
        /// The serializer's error.
        reason: String,
    },
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
