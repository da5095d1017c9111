use super::*;
use crate::domain::{Bar, Symbol, Timeframe};
use chrono::TimeZone;
use chrono::Utc;

mod damage;
mod start;

fn bar(sym: &str, day: u32, c: f64) -> Bar {
    let t = Utc.with_ymd_and_hms(2020, 1, day, 5, 0, 0).unwrap();
    Bar::new(Symbol::new(sym).unwrap(), Timeframe::DAY1, t, c, c + 1.0, c - 1.0, c, 1000.0).unwrap()
}

#[test]
fn bars_scan_in_time_order_and_replace() {
    let dir = tempfile::tempdir().unwrap();
    for s in [Store::open(dir.path()).unwrap(), Store::in_memory().unwrap()] {
        bars_of(&s);
    }
}

fn bars_of(s: &Store) {
    // Written out of order, with a neighbour symbol whose name is a prefix.
    assert_eq!(
        s.put_bars(&[bar("AA", 3, 30.0), bar("AA", 1, 10.0), bar("A", 2, 99.0), bar("AA", 2, 20.0)]).unwrap(),
        4
    );
    assert_eq!(s.put_bars(&[bar("AA", 2, 21.0)]).unwrap(), 0, "same key replaces");
    let aa = Symbol::new("AA").unwrap();
    let from = Utc.with_ymd_and_hms(2019, 1, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2021, 1, 1, 0, 0, 0).unwrap();
    let got: Vec<f64> = s.bars(&aa, Timeframe::DAY1, from, to).unwrap().iter().map(|b| b.c).collect();
    assert_eq!(got, vec![10.0, 21.0, 30.0]);
    let only2 = s.bars(&aa, Timeframe::DAY1, bar("AA", 2, 5.0).t, bar("AA", 2, 5.0).t).unwrap();
    assert_eq!(only2.len(), 1, "range is inclusive at both ends");
    assert_eq!(s.last_bar_time(&aa, Timeframe::DAY1).unwrap(), Some(bar("AA", 3, 5.0).t));
    assert_eq!(s.bar_count(&aa, Timeframe::DAY1).unwrap(), 3);
    assert_eq!(s.bar_count(&aa, Timeframe::Minutes(1)).unwrap(), 0);
}

#[test]
fn second_open_fails_at_once_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let _held = Store::open(dir.path()).unwrap();
    let started = std::time::Instant::now();
    let err = Store::open(dir.path()).err().expect("second open must fail");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Locked { .. }), "{msg}");
    assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
    drop(_held);
    assert!(Store::open(dir.path()).is_ok(), "lock released with the store");
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(dir.path().join(DB_DIR)).unwrap();
        db.insert(SCHEMA_KEY, &99u32.to_be_bytes()).unwrap();
        db.flush().unwrap();
    }
    let err = Store::open(dir.path()).err().unwrap();
    assert!(matches!(err, StoreError::NewerSchema { found: 99, supported: SCHEMA_VERSION, .. }), "{err}");
    assert!(err.to_string().contains("upgrade tradebot"));
}

#[test]
fn typed_trees_range_and_report_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let eq: TypedTree<f64> = s.tree(TreeName::Equity).unwrap();
    for (i, v) in [3.0, 1.0, 2.0].iter().enumerate() {
        let t = Utc.with_ymd_and_hms(2020, 1, 3 - i as u32, 0, 0, 0).unwrap();
        eq.insert(&keys::time_key(t), v).unwrap();
    }
    let all: Vec<f64> = eq.range(&[0u8; 8], &[0xff; 8]).unwrap().into_iter().map(|(_, v)| v).collect();
    assert_eq!(all, vec![2.0, 1.0, 3.0]);
    let kv: TypedTree<String> = s.tree(TreeName::Kv).unwrap();
    s.raw_tree(TreeName::Kv).unwrap().insert(b"bad", b"{not json".to_vec()).unwrap();
    let err = kv.get(b"bad").unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { tree: "kv", .. }), "{err}");
}

/// Child half of `order_writes_survive_sigkill`: writes an order and kills itself without any cleanup.
/// Ignored: it runs only when that test launches it by name, so it can never pass by doing nothing.
#[test]
#[ignore = "child process of store::tests::order_writes_survive_sigkill, launched by it"]
fn child_writer_for_sigkill_test() {
    let dir = std::env::var("TRADEBOT_STORE_SIGKILL_CHILD")
        .expect("run by order_writes_survive_sigkill, which sets TRADEBOT_STORE_SIGKILL_CHILD");
    let s = Store::open(Path::new(&dir)).unwrap();
    let orders: TypedTree<String> = s.tree(TreeName::Orders).unwrap();
    orders.insert(b"tb-ppo-AAPL-1-0", &"accepted".to_string()).unwrap();
    // SIGKILL to ourselves: no destructor runs, nothing is flushed.
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn order_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "store::tests::child_writer_for_sigkill_test", "--ignored", "--test-threads=1"])
        .env("TRADEBOT_STORE_SIGKILL_CHILD", dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "child should have been killed: {status:?}");
    let s = Store::open(dir.path()).unwrap();
    let orders: TypedTree<String> = s.tree(TreeName::Orders).unwrap();
    assert_eq!(orders.get(b"tb-ppo-AAPL-1-0").unwrap().as_deref(), Some("accepted"));
}

#[test]
fn last_n_reads_the_largest_keys_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let t = s.tree::<u32>(TreeName::Kv).unwrap();
    for i in [3u32, 1, 4, 2, 5] {
        t.insert(format!("k{i}").as_bytes(), &i).unwrap();
    }
    let got: Vec<u32> = t.last_n(3).unwrap().into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, vec![5, 4, 3]);
    assert_eq!(t.last_n(10).unwrap().len(), 5);
    assert!(t.last_n(0).unwrap().is_empty());
}
