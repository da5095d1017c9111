//! Read-only opens (`tradebot status`, `data show`, `risk status`, `tune list|show`): they never write
//! to the store. sled writes on open (its recovery, a new snapshot), so the database is copied to a
//! private directory beside it (`.readonly-<pid>`, removed when the store is dropped, and at the next open
//! if the process was killed), and the copy opened and checked exactly as `Store::open` checks the
//! original: the same damage is refused with the same error. Writes through such a store go to the copy
//! and are lost.

use super::sentinel::Sentinel;
use super::{DB_DIR, Store, StoreError, check, disk, guard, leftovers, lock_dir, open_db};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A private directory, removed when dropped.
pub(super) struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Store {
    /// Opens the store under `state_dir` without changing any of its files (see the module docs). A
    /// state directory without a database reads as an empty store; a missing one is an error (it is not
    /// created).
    pub fn open_read_only(state_dir: &Path) -> Result<Store, StoreError> {
        open(state_dir).map_err(|e| disk::classify(state_dir, e))
    }
}

fn open(state_dir: &Path) -> Result<Store, StoreError> {
    let dir = state_dir.to_path_buf();
    // Nothing is created: a missing state directory is an error, not an empty store.
    if !dir.is_dir() {
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory (nothing was created)");
        return Err(StoreError::Dir { dir, source });
    }
    let lock = lock_dir(&dir)?;
    leftovers::clear_state_dir(&dir);
    let scratch = Scratch(dir.join(format!(".readonly-{}", std::process::id())));
    let copy = scratch.0.join(DB_DIR);
    let src = dir.join(DB_DIR);
    let copied = if src.is_dir() { check::copy_dir(&src, &copy) } else { std::fs::create_dir_all(&copy) };
    copied.map_err(|source| StoreError::Dir { dir: scratch.0.clone(), source })?;
    leftovers::clear_db(&copy);
    let found = Sentinel::read(&dir).map_err(|source| StoreError::Sentinel { path: Sentinel::path(&dir), source })?;
    let db = guard::guarded(&dir, || {
        let db = open_db(&copy)?;
        super::check_schema(&db, &dir)?;
        check::scan_all(&db)?;
        Ok(db)
    })?;
    let mark = check::verify_against(&db, &dir, found)?;
    // The copy's own sentinel, so that a write through this store never touches the real one.
    let seal = Sentinel::create(&scratch.0, mark)
        .map_err(|source| StoreError::Sentinel { path: Sentinel::path(&scratch.0), source })?;
    Ok(Store { db, dir, seal: Arc::new(Mutex::new(seal)), _lock: Arc::new(lock), _scratch: Some(Arc::new(scratch)) })
}
