//! Read snapshots for the commands that read beside a running daemon (`tradebot data show`, `backtest`,
//! `risk status`, `tune list`, `train`, ...): the daemon holds the store's lock, so such a command asks it
//! (control socket, `snapshot`) for a copy of every tree, written under `<state_dir>/snapshots/` as a
//! database of its own with its sentinel, and opens that copy read-only. The critical trees are copied
//! under the sentinel's lock, as `backup` copies them: the orders, fills and kill switch in a snapshot
//! are one consistent moment. A snapshot is the reader's: it opens it in place, locked while open
//! (`open_snapshot`), and removes it when done; those left behind (a reader killed before it removed its
//! own) are removed by the next snapshot once older than `STALE` and not locked.

use super::scratch::Scratch;
use super::sentinel::Sentinel;
use super::{DB_DIR, LOCK_FILE, Store, StoreError, TreeName, lock_seal, open_db};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where snapshots are written, under the state directory.
pub const SNAPSHOT_DIR: &str = "snapshots";
/// A snapshot older than this is removed by the next one (its reader has long since copied it).
const STALE: Duration = Duration::from_secs(600);

impl Store {
    /// Writes a consistent copy of every tree as a database of its own under
    /// `<state_dir>/snapshots/<time>-seq<N>/` and returns that directory, which `Store::open_read_only`
    /// opens. Critical writes wait while the critical trees are copied.
    pub fn snapshot(&self) -> Result<PathBuf, StoreError> {
        let db = self.db.sled("a snapshot")?;
        let root = self.dir.join(SNAPSHOT_DIR);
        std::fs::create_dir_all(&root).map_err(|source| StoreError::Dir { dir: root.clone(), source })?;
        remove_stale(&root, STALE);
        let seal = lock_seal(&self.seal);
        let mark = seal.mark.clone();
        let name =
            format!("{}-seq{}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ"), mark.seq, std::process::id());
        let dir = root.join(name);
        let fail = |source| StoreError::Dir { dir: dir.clone(), source };
        std::fs::create_dir(&dir).map_err(fail)?;
        let copy = open_db(&dir.join(DB_DIR))?;
        let critical = |n: &sled::IVec| {
            TreeName::ALL.iter().any(|t| t.durable() && t.as_str().as_bytes() == n.as_ref())
                || n.as_ref() == b"__sled__default"
        };
        let mut names = db.tree_names();
        names.sort_by_key(|n| !critical(n));
        let mut seal = Some(seal);
        for name in names {
            if !critical(&name) {
                // The rest (bars, decisions) after the lock: trading waits only for the critical trees.
                seal = None;
            }
            let (from, to) = (db.open_tree(&name)?, copy.open_tree(&name)?);
            for kv in from.iter() {
                let (k, v) = kv?;
                to.insert(k, v)?;
            }
        }
        drop(seal);
        copy.flush()?;
        drop(copy);
        Sentinel::create(&dir, mark).map_err(|source| StoreError::Sentinel { path: Sentinel::path(&dir), source })?;
        Ok(dir)
    }
}

/// Removes the snapshot directories under `root` older than `age` (by modification time); a directory
/// that cannot be read or removed is left for the next time, and so is one a reader has open in place
/// (its lock held: `open_snapshot`), however long it works.
fn remove_stale(root: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for e in entries.flatten() {
        let old = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|d| d > age);
        let in_use = || std::fs::File::open(e.path().join(LOCK_FILE)).is_ok_and(|f| f.try_lock().is_err());
        if old
            && !in_use()
            && let Err(err) = std::fs::remove_dir_all(e.path())
        {
            log::warn!("store: cannot remove the old read snapshot {}: {err}", e.path().display());
        }
    }
}

/// Opens a read snapshot the daemon took for this reader (`Store::snapshot`) in place: it is the
/// reader's own, so no second copy is made. While open it is locked (the next snapshot's clean-up leaves
/// it alone); it is removed when the last clone of the store is dropped. Writes go to the snapshot and are
/// lost with it. Where it cannot be opened in place (a reader that may not write the state directory),
/// it is copied as `Store::open_read_only` copies, and removed at once where it can be.
pub fn open_snapshot(dir: &Path) -> Result<Store, StoreError> {
    match Store::open(dir) {
        Ok(mut store) => {
            store._scratch = Some(std::sync::Arc::new(Scratch::Adopted(dir.to_path_buf())));
            Ok(store)
        }
        Err(e) => {
            log::debug!("store: the read snapshot {} is read from a copy: {e}", dir.display());
            let opened = Store::open_read_only(dir);
            release(dir);
            opened
        }
    }
}

/// Removes a snapshot its reader has opened (the reader works on its own copy). A reader that may not
/// write the state directory leaves it for the daemon's next snapshot to remove.
pub fn release(dir: &Path) {
    let is_snapshot = dir.parent().and_then(|p| p.file_name()).is_some_and(|n| n == SNAPSHOT_DIR);
    if is_snapshot && let Err(e) = std::fs::remove_dir_all(dir) {
        log::debug!("store: read snapshot {} left for the daemon to remove: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TypedTree;

    #[test]
    fn a_snapshot_beside_the_writer_reads_as_the_store_did_and_later_writes_are_not_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let orders: TypedTree<String> = store.tree(TreeName::Orders).unwrap();
        orders.insert(b"tb-ppo-AAPL-1-0", &"accepted".to_string()).unwrap();
        let decisions: TypedTree<u32> = store.tree(TreeName::Decisions).unwrap();
        decisions.insert(b"AAPL", &7).unwrap();
        // The writer holds the lock: a plain read-only open is refused, a snapshot is not.
        assert!(matches!(Store::open_read_only(dir.path()), Err(StoreError::Locked { .. })));
        let snap = store.snapshot().unwrap();
        assert!(snap.starts_with(dir.path().join(SNAPSHOT_DIR)), "{}", snap.display());
        orders.insert(b"tb-ppo-AAPL-2-0", &"accepted".to_string()).unwrap();

        let read = Store::open_read_only(&snap).unwrap();
        let got: TypedTree<String> = read.tree(TreeName::Orders).unwrap();
        assert_eq!(got.get(b"tb-ppo-AAPL-1-0").unwrap().as_deref(), Some("accepted"));
        assert_eq!(got.get(b"tb-ppo-AAPL-2-0").unwrap(), None, "a write after the snapshot is not in it");
        assert_eq!(read.tree::<u32>(TreeName::Decisions).unwrap().get(b"AAPL").unwrap(), Some(7));
        assert_eq!(read.write_seq(), 1, "the copy's sentinel agrees with its database");
        release(&snap);
        assert!(!snap.exists(), "the reader removes the snapshot it opened");
    }

    /// The reader opens its snapshot where the daemon wrote it (no second copy), and while it works there
    /// the clean-up of later snapshots leaves it alone; dropping the store removes it.
    #[test]
    fn a_snapshot_is_opened_in_place_kept_while_open_and_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let orders: TypedTree<String> = store.tree(TreeName::Orders).unwrap();
        orders.insert(b"tb-ppo-AAPL-1-0", &"filled".to_string()).unwrap();
        let snap = store.snapshot().unwrap();
        let read = open_snapshot(&snap).unwrap();
        assert_eq!(read.dir(), snap.as_path(), "opened in place, not copied elsewhere");
        let got: TypedTree<String> = read.tree(TreeName::Orders).unwrap();
        assert_eq!(got.get(b"tb-ppo-AAPL-1-0").unwrap().as_deref(), Some("filled"));
        std::thread::sleep(Duration::from_millis(20));
        remove_stale(&dir.path().join(SNAPSHOT_DIR), Duration::from_millis(10));
        assert!(snap.join(DB_DIR).is_dir(), "a snapshot open in place is not cleaned up under its reader");
        let again = read.clone();
        drop(read);
        assert!(snap.exists(), "removed with the last clone only");
        drop((got, again));
        assert!(!snap.exists(), "the reader's snapshot is removed when it is done");
        // One never opened (its reader killed first) is cleaned up once old.
        let left = store.snapshot().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        remove_stale(&dir.path().join(SNAPSHOT_DIR), Duration::from_millis(10));
        assert!(!left.exists(), "a stale snapshot nobody has open is removed");
    }

    #[test]
    fn old_snapshots_are_removed_and_only_snapshot_directories_are_released() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(SNAPSHOT_DIR);
        std::fs::create_dir_all(root.join("old")).unwrap();
        remove_stale(&root, Duration::from_secs(3600));
        assert!(root.join("old").exists(), "a fresh snapshot is kept");
        std::thread::sleep(Duration::from_millis(20));
        remove_stale(&root, Duration::from_millis(10));
        assert!(!root.join("old").exists(), "a stale snapshot is removed");
        let other = dir.path().join("db");
        std::fs::create_dir_all(&other).unwrap();
        release(&other);
        assert!(other.exists(), "release never removes what is not a snapshot");
    }
}
