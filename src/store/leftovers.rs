//! What an interrupted start, check or backup leaves behind, recognised and cleared at open (each with a
//! WARN naming the file), so that nothing left by a failed start (a full disk, a kill) blocks the next:
//!
//! - `db/snap.*.generating`: a snapshot sled was still writing (sled renames it into place once complete).
//!   sled reads the newest `snap.*` file and refuses an empty or torn one, so such a file wedged the store;
//!   removing it loses nothing, sled rebuilds its snapshot from its log.
//! - `db/snap.*` of 12 bytes or fewer: a truncated snapshot, which sled refuses the same way.
//! - `db/conf` whose checksum does not match: sled's settings file torn while written; sled rewrites it.
//! - `.check-*`, `.readonly-*`, `.restore-*` under the state directory: private copies of the database
//!   whose process ended before removing them (`store restore`; `store check` and read-only commands
//!   of earlier versions, which copied beside the store: now they copy to the system's temporary dir).
//! - `backups/*.tmp`: a backup whose writing was interrupted (complete ones end in `.tbk`).
//!
//! Called with the state directory's lock held, so none of these belongs to a live process.

use super::BACKUP_DIR;
use std::path::Path;

/// Prefixes of the private database copies under the state directory.
pub(super) const COPY_PREFIXES: [&str; 3] = [".check-", ".readonly-", ".restore-"];

/// Clears the leftovers in the database directory `db` (sled's files).
pub(super) fn clear_db(db: &Path) {
    let Ok(rd) = std::fs::read_dir(db) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let path = e.path();
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        let why = if name.starts_with("snap.") && name.ends_with(".generating") {
            Some(format!("a snapshot sled left unfinished ({len} bytes) when a start was interrupted (a full disk?)"))
        } else if name.starts_with("snap.") && !name.ends_with(".in___motion") && len <= 12 {
            Some(format!("a truncated snapshot ({len} bytes)"))
        } else if name == "conf" && len > 8 && !conf_intact(&path) {
            Some("sled's settings file, torn while written (sled writes it again)".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            match std::fs::remove_file(&path) {
                Ok(()) => log::warn!(
                    "store: removed {}: {why}; nothing is lost, sled rebuilds it from its log",
                    path.display()
                ),
                Err(err) => log::warn!("store: cannot remove {} ({why}): {err}", path.display()),
            }
        }
    }
}

/// Clears the leftovers in the state directory: stale private copies and unfinished backups.
pub(super) fn clear_state_dir(state_dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(state_dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if COPY_PREFIXES.iter().any(|p| name.starts_with(p)) && e.path().is_dir() {
                remove(&e.path(), "a private copy of the database left by a command that did not finish", true);
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(state_dir.join(BACKUP_DIR)) {
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "tmp") {
                remove(&e.path(), "a backup whose writing was interrupted", false);
            }
        }
    }
}

fn remove(path: &Path, why: &str, dir: bool) {
    let r = if dir { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    match r {
        Ok(()) => log::warn!("store: removed {}: {why}", path.display()),
        Err(e) => log::warn!("store: cannot remove {} ({why}): {e}", path.display()),
    }
}

/// sled's `conf`: its text, then the CRC-32 of the text (u32 LE).
fn conf_intact(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else { return true };
    if b.len() <= 4 {
        return false;
    }
    let (text, crc) = b.split_at(b.len() - 4);
    crc.try_into().map(u32::from_le_bytes).is_ok_and(|c| c == crc32fast::hash(text))
}
