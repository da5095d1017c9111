//! A damaged or rolled-back store is refused at open with an error that says what to do, never a panic
//! and never a silent open; backups put it back.

use crate::domain::{Bar, Symbol, Timeframe};
use crate::store::*;
use chrono::Utc;
use serde_json::{Value, json};

const ORDERS: usize = 3000;

/// A store with `ORDERS` order records (~1 MB of log) and a kill-switch record, closed.
fn filled_store(dir: &Path) {
    let s = Store::open(dir).unwrap();
    let orders = s.tree::<Value>(TreeName::Orders).unwrap();
    for i in 0..ORDERS {
        let rec = json!({"id": format!("tb-{i:06}"), "symbol": "AAPL", "qty": i, "note": "x".repeat(200)});
        orders.insert(format!("tb-{i:06}").as_bytes(), &rec).unwrap();
    }
    s.tree::<Value>(TreeName::Kv).unwrap().insert(b"kill_switch", &json!({"tripped": true})).unwrap();
    assert_eq!(s.write_seq(), ORDERS as u64 + 1);
    s.flush().unwrap();
}

fn db_file(dir: &Path) -> PathBuf {
    dir.join(DB_DIR).join("db")
}

fn remove_snapshots(dir: &Path) {
    for e in std::fs::read_dir(dir.join(DB_DIR)).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snap.")) {
            std::fs::remove_file(p).unwrap();
        }
    }
}

/// Opens and expects a refusal naming the recovery; returns the message.
fn refused(dir: &Path) -> String {
    let err = Store::open(dir).err().expect("a damaged store must not open");
    let msg = err.to_string();
    assert!(err.is_damage(), "not reported as damage: {msg}");
    assert!(msg.contains("tradebot store check") && msg.contains("tradebot store restore"), "{msg}");
    msg
}

#[test]
fn a_truncated_database_without_its_snapshot_is_refused_not_opened_empty() {
    let dir = tempfile::tempdir().unwrap();
    filled_store(dir.path());
    remove_snapshots(dir.path());
    std::fs::OpenOptions::new().write(true).open(db_file(dir.path())).unwrap().set_len(100 * 1024).unwrap();
    let msg = refused(dir.path());
    assert!(msg.contains("rolled back") || msg.contains("cannot be read"), "{msg}");
}

#[test]
fn flipped_bytes_are_refused_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    filled_store(dir.path());
    let path = db_file(dir.path());
    let mut b = std::fs::read(&path).unwrap();
    for i in (1000..b.len()).step_by(50_000) {
        b[i] ^= 0xff;
    }
    std::fs::write(&path, b).unwrap();
    refused(dir.path());
}

#[test]
fn a_zeroed_chunk_without_the_snapshot_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    filled_store(dir.path());
    remove_snapshots(dir.path());
    let path = db_file(dir.path());
    let mut b = std::fs::read(&path).unwrap();
    let end = b.len().min(400_000);
    b[200_000..end].fill(0);
    std::fs::write(&path, b).unwrap();
    refused(dir.path());
}

#[test]
fn a_removed_snapshot_alone_loses_nothing_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    filled_store(dir.path());
    remove_snapshots(dir.path());
    let s = Store::open(dir.path()).expect("sled rebuilds the snapshot from its log");
    assert_eq!(s.tree::<Value>(TreeName::Orders).unwrap().len(), ORDERS);
    assert_eq!(s.write_seq(), ORDERS as u64 + 1);
}

#[test]
fn an_older_copy_of_the_database_is_refused_as_rolled_back_and_reseal_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let old = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path()).unwrap();
        s.tree::<Value>(TreeName::Fills).unwrap().insert(b"f1", &json!(1)).unwrap();
    }
    check::copy_dir(&dir.path().join(DB_DIR), &old.path().join(DB_DIR)).unwrap();
    {
        let s = Store::open(dir.path()).unwrap();
        s.tree::<Value>(TreeName::Fills).unwrap().insert(b"f2", &json!(2)).unwrap();
    }
    std::fs::remove_dir_all(dir.path().join(DB_DIR)).unwrap();
    check::copy_dir(&old.path().join(DB_DIR), &dir.path().join(DB_DIR)).unwrap();
    let msg = refused(dir.path());
    assert!(msg.contains("written 1 critical records but its sentinel saw 2"), "{msg}");
    // `store check` says the same and changes nothing.
    let before = std::fs::read(db_file(dir.path())).unwrap();
    assert!(check::check(dir.path()).unwrap_err().is_damage());
    assert_eq!(std::fs::read(db_file(dir.path())).unwrap(), before, "check must not touch the database");
    // The user accepts the older copy.
    assert_eq!(backup::reseal(dir.path()).unwrap(), 1);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.tree::<Value>(TreeName::Fills).unwrap().len(), 1);
}

#[test]
fn a_changed_last_record_is_refused_and_a_missing_sentinel_too() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path()).unwrap();
        s.tree::<Value>(TreeName::Kv).unwrap().insert(b"kill_switch", &json!({"tripped": true})).unwrap();
    }
    {
        // Written behind the store's back (sled directly): the sequence still matches, the record not.
        let db = open_db(&dir.path().join(DB_DIR)).unwrap();
        db.open_tree("kv").unwrap().insert(b"kill_switch", b"{\"tripped\":false}".as_slice()).unwrap();
        db.flush().unwrap();
    }
    let msg = refused(dir.path());
    assert!(msg.contains("the last kv record written (6b696c6c5f737769746368) has changed"), "{msg}");
    std::fs::remove_file(sentinel::Sentinel::path(dir.path())).unwrap();
    let msg = refused(dir.path());
    assert!(msg.contains("no readable sentinel"), "{msg}");
}

#[test]
fn a_store_from_before_sentinels_is_sealed_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open_db(&dir.path().join(DB_DIR)).unwrap();
        db.open_tree("orders").unwrap().insert(b"o1", b"{}".as_slice()).unwrap();
        db.flush().unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.write_seq(), 0);
    s.tree::<Value>(TreeName::Orders).unwrap().insert(b"o2", &json!({})).unwrap();
    drop(s);
    assert_eq!(Store::open(dir.path()).unwrap().write_seq(), 1);
}

#[test]
fn backup_and_restore_round_trip_and_keep_the_replaced_database() {
    let dir = tempfile::tempdir().unwrap();
    filled_store(dir.path());
    let bar = Bar::new(
        Symbol::new("AAPL").unwrap(),
        Timeframe::DAY1,
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2020, 1, 2, 5, 0, 0).unwrap(),
        1.0,
        2.0,
        0.5,
        1.5,
        10.0,
    )
    .unwrap();
    let taken = {
        let s = Store::open(dir.path()).unwrap();
        s.put_bars(std::slice::from_ref(&bar)).unwrap();
        let b = s.backup().unwrap();
        assert_eq!(b.header.seq, ORDERS as u64 + 1);
        assert!(b.records >= ORDERS as u64 + 3, "{} records", b.records);
        // Written after the backup: gone after the restore.
        s.tree::<Value>(TreeName::Fills).unwrap().insert(b"late", &json!(1)).unwrap();
        b
    };
    // A damaged backup is refused before anything is touched.
    let bad = dir.path().join("bad.tbk");
    let mut bytes = std::fs::read(&taken.path).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&bad, &bytes).unwrap();
    let err = backup::restore(dir.path(), &bad).unwrap_err().to_string();
    assert!(err.contains("truncated"), "{err}");
    assert!(Store::open(dir.path()).is_ok(), "a refused restore leaves the store as it was");

    backup::restore(dir.path(), &taken.path).unwrap();
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.write_seq(), ORDERS as u64 + 1);
    assert_eq!(s.tree::<Value>(TreeName::Orders).unwrap().len(), ORDERS);
    assert!(s.tree::<Value>(TreeName::Fills).unwrap().is_empty());
    assert_eq!(s.bars(&bar.symbol, Timeframe::DAY1, bar.t, bar.t).unwrap(), vec![bar]);
    let kept = std::fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).any(|e| {
        let n = e.file_name().to_string_lossy().to_string();
        n.starts_with("db.replaced-") && e.path().join("db").is_file()
    });
    assert!(kept, "the replaced database is kept");
}

#[test]
fn prune_keeps_the_newest_backups() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    for _ in 0..3 {
        s.backup().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let all = backup::list(dir.path()).unwrap();
    assert_eq!(backup::prune(dir.path(), 2).unwrap(), 1);
    assert_eq!(backup::list(dir.path()).unwrap(), all[1..].to_vec());
}
