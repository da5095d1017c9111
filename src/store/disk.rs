//! A full disk at open. sled, the sentinel and the lock file all fail with `ENOSPC` (or `EDQUOT`) when the
//! disk holding the state directory is full; such a failure is reported as `StoreError::DiskFull`, naming
//! the directory and its free space, with exit code `EX_DISK_FULL`: it is the disk, not the store, and the
//! next start after space is freed works (what a failed start leaves is cleared then: `leftovers`).

use super::StoreError;
use std::path::Path;

/// Whether `e` (any error of an open) came from a full disk or an exhausted quota.
pub(super) fn is_disk_full(e: &StoreError) -> bool {
    // sled hands back a write's error from its flusher as a new `io::Error` of the same kind (no OS code).
    let io_full = |io: &std::io::Error| {
        matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
            || matches!(io.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
    };
    match e {
        StoreError::Dir { source, .. } | StoreError::Sentinel { source, .. } => io_full(source),
        StoreError::Db(sled::Error::Io(io)) => io_full(io),
        // sled panicked on the failed write (caught by `guard`): the panic's message names the OS error.
        StoreError::Unreadable { detail, .. } | StoreError::Backup { detail, .. } => {
            detail.contains("No space left on device") || detail.contains("Disk quota exceeded")
        }
        _ => false,
    }
}

/// `e` as `StoreError::DiskFull` when it came from a full disk; else `e` unchanged.
pub(super) fn classify(dir: &Path, e: StoreError) -> StoreError {
    if !is_disk_full(&e) {
        return e;
    }
    let free = free_bytes(dir).map_or_else(|| "unknown".to_string(), human);
    StoreError::DiskFull { dir: dir.to_path_buf(), free, detail: e.to_string() }
}

/// `e` as `StoreError::NoRoomForCopy` when it came from a full disk where a read-only command copies the
/// database (`tmp`, in the system's temporary directory; `db`, the database copied); else `e` unchanged.
pub(super) fn classify_copy(tmp: &Path, db: &Path, e: StoreError) -> StoreError {
    if !is_disk_full(&e) {
        return e;
    }
    let free = free_bytes(tmp).map_or_else(|| "unknown".to_string(), human);
    let size = human(dir_bytes(db));
    StoreError::NoRoomForCopy { dir: tmp.to_path_buf(), free, size, detail: e.to_string() }
}

/// The bytes of the files under `dir` (0 where it cannot be read).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Bytes available to this user on the filesystem holding `dir` (its nearest existing ancestor).
pub(super) fn free_bytes(dir: &Path) -> Option<u64> {
    let existing = dir.ancestors().find(|p| p.exists())?;
    let st = nix::sys::statvfs::statvfs(existing).ok()?;
    #[allow(clippy::unnecessary_cast)] // u64 on 64-bit Linux, narrower elsewhere
    let bytes = (st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64);
    Some(bytes)
}

/// `1536` → "1.5 KiB".
fn human(b: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{b} bytes") } else { format!("{x:.1} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enospc_anywhere_in_an_open_is_a_full_disk_naming_the_directory_and_its_free_space() {
        let dir = tempfile::tempdir().unwrap();
        let enospc = || std::io::Error::from_raw_os_error(libc::ENOSPC);
        for e in [
            StoreError::Db(sled::Error::Io(enospc())),
            StoreError::Sentinel { path: dir.path().join("db.sentinel"), source: enospc() },
            StoreError::Dir { dir: dir.path().into(), source: std::io::Error::from_raw_os_error(libc::EDQUOT) },
            // As sled's flusher hands it back: the kind kept, the OS code not.
            StoreError::Db(sled::Error::Io(std::io::Error::new(std::io::ErrorKind::StorageFull, "Os { code: 28 }"))),
            StoreError::Unreadable { dir: dir.path().into(), detail: format!("sled failed reading it: {}", enospc()) },
        ] {
            let e = classify(dir.path(), e);
            let msg = e.to_string();
            assert!(e.is_disk_full() && !e.is_damage(), "{msg}");
            assert!(msg.contains(&dir.path().display().to_string()) && msg.contains(" free"), "{msg}");
            assert!(!msg.contains("free unknown"), "the free space is measured: {msg}");
        }
        let other = classify(dir.path(), StoreError::Db(sled::Error::Io(std::io::Error::other("x"))));
        assert!(!other.is_disk_full());
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(12), "12 bytes");
    }
}
