//! Read-only opens (`tradebot status`, `data show`, `risk status`, `tune list|show`, `store check`): they
//! never write to the state directory, not even the lock file. sled writes on open (its recovery, a new
//! snapshot), so the database is copied to a private directory in the system's temporary directory
//! (`$TMPDIR`, `tradebot-readonly-*`, removed when the store is dropped), and the copy opened and
//! checked exactly as `Store::open` checks the original: the same damage is refused with the same error.
//! Writes through such a store go to the copy and are lost. The copy is taken under the store's lock,
//! held through a read-only handle on the lock file (`flock` needs no write access), so that no writer
//! changes the database mid-copy; a state directory whose lock file was never made has never had a
//! writer, and is read without one.

use super::scratch::{Scratch, lock_to_read};
use super::sentinel::Sentinel;
use super::{DB_DIR, Store, StoreError, check, disk, guard, open_db};
use std::path::Path;
use std::sync::{Arc, Mutex};

impl Store {
    /// Opens the store under `state_dir` without changing any of its files (see the module docs). A
    /// state directory without a database reads as an empty store; a missing one is an error (it is not
    /// created).
    pub fn open_read_only(state_dir: &Path) -> Result<Store, StoreError> {
        open(state_dir)
    }
}

fn open(state_dir: &Path) -> Result<Store, StoreError> {
    let dir = state_dir.to_path_buf();
    // Nothing is created: a missing state directory is an error, not an empty store.
    if !dir.is_dir() {
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory (nothing was created)");
        return Err(StoreError::Dir { dir, source });
    }
    let lock = lock_to_read(&dir)?;
    let scratch = Scratch::new(&dir)?;
    let copy = scratch.path().join(DB_DIR);
    let src = dir.join(DB_DIR);
    let copied = if src.is_dir() { check::copy_dir(&src, &copy) } else { std::fs::create_dir_all(&copy) };
    // Nothing is written in the state directory: a full disk can only be the copy's.
    let no_room = |e| disk::classify_copy(scratch.parent(), &src, e);
    copied.map_err(|source| no_room(StoreError::Dir { dir: scratch.path().to_path_buf(), source }))?;
    super::leftovers::clear_db(&copy);
    let found = Sentinel::read(&dir).map_err(|source| StoreError::Sentinel { path: Sentinel::path(&dir), source })?;
    let db = guard::guarded(&dir, || {
        let db = open_db(&copy)?;
        super::check_schema(&db, &dir)?;
        check::scan_all(&db)?;
        Ok(db)
    })
    .map_err(no_room)?;
    let mark = check::verify_against(&db, &dir, found)?;
    // The copy's own sentinel, so that a write through this store never touches the real one.
    let seal = Sentinel::create(scratch.path(), mark)
        .map_err(|source| StoreError::Sentinel { path: Sentinel::path(scratch.path()), source })?;
    Ok(Store {
        db: super::backend::Db::Sled(db),
        dir,
        seal: Arc::new(Mutex::new(seal)),
        _lock: Arc::new(lock),
        _scratch: Some(Arc::new(scratch)),
        durability: super::memory::Durability::on_disk(),
    })
}
