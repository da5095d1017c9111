//! Private copies of the database for the commands that only read (`readonly`, `store check`) and for
//! `store restore`'s look at the database it replaces: a directory in the system's temporary directory,
//! and the store's lock taken through a read-only handle, so that nothing is written in the state
//! directory.

use super::{DB_DIR, LOCK_FILE, StoreError, disk};
use std::fs::File;
use std::path::Path;

/// A private directory, removed when dropped: one made in the system's temporary directory, or one a
/// reader was handed as its own (a read snapshot opened in place, `snapshot::open_snapshot`).
pub(super) enum Scratch {
    Temp(tempfile::TempDir),
    Adopted(std::path::PathBuf),
}

impl Scratch {
    /// A new private directory for a copy of the database under `state_dir`.
    pub(super) fn new(state_dir: &Path) -> Result<Scratch, StoreError> {
        let tmp = std::env::temp_dir();
        tempfile::Builder::new().prefix("tradebot-readonly-").tempdir_in(&tmp).map(Scratch::Temp).map_err(|source| {
            disk::classify_copy(&tmp, &state_dir.join(DB_DIR), StoreError::Dir { dir: tmp.clone(), source })
        })
    }

    pub(super) fn path(&self) -> &Path {
        match self {
            Scratch::Temp(t) => t.path(),
            Scratch::Adopted(p) => p,
        }
    }

    /// The directory it is in (for a temporary one, what `TMPDIR` names).
    pub(super) fn parent(&self) -> &Path {
        self.path().parent().unwrap_or(self.path())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Scratch::Adopted(p) = self
            && let Err(e) = std::fs::remove_dir_all(&*p)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            log::debug!("store: {} left for the daemon to remove: {e}", p.display());
        }
    }
}

/// The store's lock for a reader: the lock file opened read-only and locked as `Store::open` locks it
/// (exclusive, non-blocking: a running daemon is `StoreError::Locked` at once), its content (the owner's
/// pid) left alone. `None` where there is no lock file: no writer ever opened this directory.
pub(super) fn lock_to_read(dir: &Path) -> Result<Option<File>, StoreError> {
    let path = dir.join(LOCK_FILE);
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StoreError::Dir { dir: dir.to_path_buf(), source }),
    };
    if f.try_lock().is_err() {
        return Err(super::locked(dir));
    }
    Ok(Some(f))
}
