//! A start never wedges the store, every open sees the damage `store check` sees, read-only opens change
//! no file, and a restore keeps a tripped kill switch.

use crate::store::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A closed store with an order, a tripped kill switch and some bars.
fn small_store(dir: &Path) {
    let s = Store::open(dir).unwrap();
    s.tree::<Value>(TreeName::Orders).unwrap().insert(b"tb-1", &json!({"id": "tb-1"})).unwrap();
    s.tree::<Value>(TreeName::Kv).unwrap().insert(b"risk.kill_switch", &tripped("2026-01-02T15:00:00Z")).unwrap();
    s.tree::<Value>(TreeName::Decisions).unwrap().insert(b"d1", &json!({"x": 1})).unwrap();
    s.flush().unwrap();
}

fn tripped(at: &str) -> Value {
    json!({"tripped_at": at, "reason": "daily loss 3.10% over the 3% limit"})
}

/// Every file under the state directory (the database, its sentinel, backups) and its bytes' hash.
fn files(dir: &Path) -> BTreeMap<PathBuf, u32> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != LOCK_FILE) {
                out.insert(p.clone(), crc32fast::hash(&std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

#[test]
fn leftovers_of_an_interrupted_start_are_cleared_and_the_next_start_works() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let db = dir.path().join(DB_DIR);
    // What a start killed by a full disk leaves: sled's snapshot begun but never written (it sorts after
    // every complete snapshot, so sled would read it), a torn settings file, a check's private copy, and
    // a backup never finished.
    let generating = db.join("snap.FFFFFFFFFFFFFFFF.generating");
    std::fs::write(&generating, b"").unwrap();
    let conf = std::fs::read(db.join("conf")).unwrap();
    std::fs::write(db.join("conf"), &conf[..conf.len() - 6]).unwrap();
    std::fs::create_dir_all(dir.path().join(".check-4242/db")).unwrap();
    std::fs::create_dir_all(dir.path().join("backups")).unwrap();
    std::fs::write(dir.path().join("backups/store-x.tmp"), b"half").unwrap();
    let s = Store::open(dir.path()).expect("the next start works");
    assert_eq!(s.tree::<Value>(TreeName::Orders).unwrap().len(), 1, "nothing lost");
    assert!(!generating.exists() && !dir.path().join(".check-4242").exists());
    assert!(!dir.path().join("backups/store-x.tmp").exists());
    drop(s);
    assert!(check::check(dir.path()).is_ok());
    // `store check` alone (a copy) copes with the leftover too, leaving the original as it is.
    std::fs::write(&generating, b"").unwrap();
    assert!(check::check(dir.path()).is_ok());
    assert!(generating.exists(), "check changes nothing");
}

#[test]
fn a_sentinel_torn_on_the_very_first_start_does_not_block_the_next() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    // The first start's sentinel write failed on a full disk: the file exists, empty.
    std::fs::write(sentinel::Sentinel::path(dir.path()), b"").unwrap();
    let s = Store::open(dir.path()).expect("no critical record was ever written: nothing to guard");
    s.tree::<Value>(TreeName::Fills).unwrap().insert(b"f", &json!(1)).unwrap();
    drop(s);
    assert_eq!(Store::open(dir.path()).unwrap().write_seq(), 1);
    // Once something critical was written, an unreadable sentinel is refused as before.
    std::fs::write(sentinel::Sentinel::path(dir.path()), b"").unwrap();
    assert!(Store::open(dir.path()).err().unwrap().is_damage());
}

#[test]
fn a_record_only_the_full_check_reads_is_refused_at_every_open_with_checks_message() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    {
        // A bars record that does not decode (sled wrote it intact: only decoding it finds it).
        let db = open_db(&dir.path().join(DB_DIR)).unwrap();
        db.open_tree("bars").unwrap().insert(b"garbage", b"not a bar".as_slice()).unwrap();
        db.flush().unwrap();
    }
    let by_check = check::check(dir.path()).unwrap_err();
    assert!(by_check.is_damage(), "{by_check}");
    let by_open = Store::open(dir.path()).err().expect("open refuses what check refuses");
    let by_read_only = Store::open_read_only(dir.path()).err().expect("so does a read-only open");
    assert_eq!(by_open.to_string(), by_check.to_string());
    assert_eq!(by_read_only.to_string(), by_check.to_string());
    assert!(by_open.is_damage() && by_read_only.is_damage());
}

#[test]
fn a_read_only_open_changes_no_file_and_reads_everything() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    // A leftover too: a read-only open copes with it in its copy, leaving the original alone.
    std::fs::write(dir.path().join(DB_DIR).join("snap.FFFFFFFFFFFFFFFF.generating"), b"").unwrap();
    let before = files(dir.path());
    {
        let s = Store::open_read_only(dir.path()).unwrap();
        assert_eq!(s.write_seq(), 2);
        let kv = s.tree::<Value>(TreeName::Kv).unwrap();
        assert_eq!(kv.get(b"risk.kill_switch").unwrap(), Some(tripped("2026-01-02T15:00:00Z")));
        assert_eq!(s.tree::<Value>(TreeName::Decisions).unwrap().len(), 1);
        // A second opener is refused while it is open, as for any open.
        assert!(matches!(Store::open(dir.path()).err(), Some(StoreError::Locked { .. })));
    }
    assert_eq!(files(dir.path()), before, "not one byte of the store changed");
    // An empty state directory reads as an empty store and is left without a database.
    let empty = tempfile::tempdir().unwrap();
    assert!(Store::open_read_only(empty.path()).unwrap().tree::<Value>(TreeName::Orders).unwrap().is_empty());
    assert!(!empty.path().join(DB_DIR).exists());
}

/// Every entry under `dir` (files and folders), with each file's bytes and modification time.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<(u32, std::time::SystemTime)>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
                out.insert(p, None);
            } else {
                let m = std::fs::metadata(&p).unwrap().modified().unwrap();
                out.insert(p.clone(), Some((crc32fast::hash(&std::fs::read(&p).unwrap()), m)));
            }
        }
    }
    out
}

#[test]
fn a_read_only_open_and_a_check_create_nothing_in_the_state_dir_not_even_a_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    // As the daemon leaves it: its lock file holds its pid. A reader neither rewrites it nor makes a copy
    // beside the store, even while it is open.
    std::fs::write(dir.path().join(LOCK_FILE), b"4242").unwrap();
    let before = tree(dir.path());
    {
        let s = Store::open_read_only(dir.path()).unwrap();
        assert_eq!(s.write_seq(), 2);
        assert_eq!(tree(dir.path()), before, "nothing beside the store while it is open");
    }
    check::check(dir.path()).unwrap();
    assert_eq!(tree(dir.path()), before, "the lock file and the database as they were");
    // A state directory no writer ever opened (no lock file) gets none.
    std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
    let before = tree(dir.path());
    let s = Store::open_read_only(dir.path()).unwrap();
    assert_eq!(s.tree::<Value>(TreeName::Decisions).unwrap().len(), 1);
    check::check(dir.path()).unwrap();
    drop(s);
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn a_restore_keeps_a_tripped_kill_switch_and_says_how_it_differed() {
    let dir = tempfile::tempdir().unwrap();
    let key: &[u8] = b"risk.kill_switch";
    let taken = {
        let s = Store::open(dir.path()).unwrap();
        s.tree::<Value>(TreeName::Orders).unwrap().insert(b"tb-1", &json!({})).unwrap();
        let b = s.backup().unwrap(); // the switch is clear in the backup
        s.tree::<Value>(TreeName::Kv).unwrap().insert(key, &tripped("2026-01-02T15:00:00Z")).unwrap();
        b
    };
    let r = backup::restore(dir.path(), &taken.path).unwrap();
    let said = r.kill_switch.expect("the difference is reported");
    assert!(said.contains("the backup's kill switch is clear") && said.contains("kept tripped"), "{said}");
    assert!(said.contains("2026-01-02T15:00:00Z") && said.contains("daily loss 3.10%"), "{said}");
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.tree::<Value>(TreeName::Kv).unwrap().get(key).unwrap(), Some(tripped("2026-01-02T15:00:00Z")));
    // The other way round: tripped in the backup, cleared since; the backup's tripped switch comes back.
    let taken = s.backup().unwrap();
    s.tree::<Value>(TreeName::Kv).unwrap().remove(key).unwrap();
    drop(s);
    let said = backup::restore(dir.path(), &taken.path).unwrap().kill_switch.expect("reported");
    assert!(said.contains("the replaced database's was clear: it is kept tripped"), "{said}");
    // The same switch on both sides: nothing to say.
    assert!(backup::restore(dir.path(), &taken.path).unwrap().kill_switch.is_none());
    let s = Store::open(dir.path()).unwrap();
    assert!(s.tree::<Value>(TreeName::Kv).unwrap().get(key).unwrap().is_some());
}
