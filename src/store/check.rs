//! Checking a store: the scan (every record of every tree decodes) and the comparison with the sentinel,
//! run at every open and by `tradebot store check` (on a copy, so that sled's own recovery cannot change
//! the original).

use super::sentinel::{Found, LastWrite, Mark, Sentinel};
use super::{DB_DIR, StoreError, TreeName, db_seq, guard, keys};
use std::path::{Path, PathBuf};

/// Decodes every record of every tree, returning the counts in `TreeName::ALL` order: the check of
/// `tradebot store check`, run at every open too, so that every command refuses the same damage (sled
/// reads pages lazily: a damaged page is found only when read). Runs under `guard::guarded`.
pub(super) fn scan_all(db: &sled::Db) -> Result<Vec<(TreeName, usize)>, StoreError> {
    TreeName::ALL.iter().map(|&name| Ok((name, scan_tree(db, name)?))).collect()
}

fn scan_tree(db: &sled::Db, name: TreeName) -> Result<usize, StoreError> {
    let tree = db.open_tree(name.as_str())?;
    let mut n = 0;
    for kv in tree.iter() {
        let (k, v) = kv?;
        let ok = match name {
            TreeName::Bars => keys::parse_bar_key(&k).is_some() && v.len() == 40,
            _ => serde_json::from_slice::<serde_json::Value>(&v).is_ok(),
        };
        if !ok {
            return Err(StoreError::Corrupt {
                tree: name.as_str(),
                reason: format!("record {} does not decode", super::sentinel::hex(&k)),
            });
        }
        n += 1;
    }
    Ok(n)
}

/// Compares the opened database with what the sentinel said; returns the mark to continue from.
pub(super) fn verify_against(db: &sled::Db, dir: &Path, found: Found) -> Result<Mark, StoreError> {
    let db_seq = db_seq(db)?;
    match found {
        Found::Absent if db_seq == 0 => {
            if !is_empty(db)? {
                log::info!("store {}: sealing a store written before sentinels", dir.display());
            }
            Ok(Mark { seq: 0, last: Default::default() })
        }
        // A sentinel torn while first written (a start on a full disk): nothing critical was ever written,
        // so there is nothing it could have guarded.
        Found::Unreadable if db_seq == 0 => {
            log::warn!(
                "store {}: its sentinel {} is unreadable (torn when first written) and no critical record was \
                 ever written; writing it again",
                dir.display(),
                Sentinel::path(dir).display()
            );
            Ok(Mark { seq: 0, last: Default::default() })
        }
        Found::Absent | Found::Unreadable => Err(StoreError::NoSentinel { dir: dir.to_path_buf(), db_seq }),
        Found::Mark(m) if db_seq < m.seq => {
            Err(StoreError::RolledBack { dir: dir.to_path_buf(), db_seq, sentinel_seq: m.seq })
        }
        Found::Mark(m) if db_seq == m.seq => {
            for (tree, w) in &m.last {
                if let Some(detail) = differs(db, tree, w)? {
                    return Err(StoreError::Damaged { dir: dir.to_path_buf(), detail });
                }
            }
            Ok(m)
        }
        // The database got ahead of the sentinel: a crash between a critical write's flush and the
        // sentinel's. The last writes the sentinel names may have been overwritten since; start afresh.
        Found::Mark(_) => Ok(Mark { seq: db_seq, last: Default::default() }),
    }
}

fn differs(db: &sled::Db, tree: &str, w: &LastWrite) -> Result<Option<String>, StoreError> {
    let Some(key) = w.key_bytes() else {
        return Ok(Some(format!("the sentinel's last {tree} key is not hex")));
    };
    let got = db.open_tree(tree)?.get(&key)?;
    let got_crc = got.as_deref().map(crc32fast::hash);
    Ok(match (w.crc, got_crc) {
        (a, b) if a == b => None,
        (Some(_), None) => Some(format!("the last {tree} record written ({}) is missing", w.key)),
        (None, Some(_)) => Some(format!("the last {tree} record removed ({}) is back", w.key)),
        _ => Some(format!("the last {tree} record written ({}) has changed", w.key)),
    })
}

fn is_empty(db: &sled::Db) -> Result<bool, StoreError> {
    for name in TreeName::ALL {
        if !db.open_tree(name.as_str())?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What `tradebot store check` found.
#[derive(Debug)]
pub struct Report {
    /// The state directory checked.
    pub dir: PathBuf,
    /// Records per tree, in `TreeName::ALL` order.
    pub counts: Vec<(TreeName, usize)>,
    /// The database's critical-write sequence.
    pub seq: u64,
    /// What the sentinel holds, for a person: `sequence N`, `absent` or `unreadable`.
    pub sentinel: String,
}

/// Checks the store under `state_dir` without changing it: the database is copied to a private directory
/// in the system's temporary directory (under the store's lock, taken read-only as a read-only open takes
/// it) and the copy opened, every record of every tree decoded, and the result compared with the sentinel.
/// The caller must hold no `Store` on it.
pub fn check(state_dir: &Path) -> Result<Report, StoreError> {
    let _lock = super::scratch::lock_to_read(state_dir)?;
    let src = state_dir.join(DB_DIR);
    if !src.is_dir() {
        return Err(StoreError::Damaged {
            dir: state_dir.to_path_buf(),
            detail: format!("{} is missing", src.display()),
        });
    }
    let scratch = super::scratch::Scratch::new(state_dir)?;
    let copy = scratch.path().join(DB_DIR);
    let result = copy_dir(&src, &copy).map_err(|source| StoreError::Dir { dir: copy.clone(), source }).and_then(|()| {
        super::leftovers::clear_db(&copy);
        check_copy(state_dir, &copy)
    });
    // Nothing is written in the state directory: a full disk can only be the copy's.
    result.map_err(|e| super::disk::classify_copy(scratch.parent(), &src, e))
}

fn check_copy(state_dir: &Path, copy: &Path) -> Result<Report, StoreError> {
    let found =
        Sentinel::read(state_dir).map_err(|source| StoreError::Sentinel { path: Sentinel::path(state_dir), source })?;
    let sentinel = match &found {
        Found::Absent => "absent".to_string(),
        Found::Unreadable => "unreadable".to_string(),
        Found::Mark(m) => format!("sequence {}", m.seq),
    };
    guard::guarded(state_dir, || {
        let db = super::open_db(copy)?;
        let counts = scan_all(&db)?;
        let seq = db_seq(&db)?;
        verify_against(&db, state_dir, found)?;
        Ok(Report { dir: state_dir.to_path_buf(), counts, seq, sentinel })
    })
}

pub(super) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
