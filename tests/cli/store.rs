//! The store from the command line: its lock, damage and restore, read-only commands that change no file,
//! a state directory that cannot be created, and a full disk.

use super::common::{self, demo_config, root, text, write_config};
use super::{config_in, tradebot};
use std::path::{Path, PathBuf};
use std::process::Output;

#[test]
fn a_held_store_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let _held = tradebot::store::Store::open(&dir.path().join("state")).unwrap();
    let started = std::time::Instant::now();
    let o = tradebot(
        &["data", "show", "AAPL", "--from", "2005-01-01", "--to", "2005-01-10", "--config", cfg.to_str().unwrap()],
        &[],
    );
    assert!(started.elapsed().as_secs() < 10);
    assert!(!o.status.success());
    assert!(text(&o).contains("in use by another tradebot process"), "{}", text(&o));
}

#[test]
fn a_damaged_store_exits_65_with_the_steps_and_restore_puts_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = tradebot(&["store", "backup", "--config", cfg], &[]);
    assert!(o.status.success() && text(&o).contains("backed up"), "{}", text(&o));
    let db = dir.path().join("state/db/db");
    let mut b = std::fs::read(&db).unwrap();
    for i in (1000..b.len()).step_by(50_000) {
        b[i] ^= 0xff;
    }
    std::fs::write(&db, b).unwrap();
    let show = ["data", "show", "AAPL", "--from", "2005-02-24", "--to", "2005-03-02", "--config", cfg];
    for args in [&["status", "--config", cfg][..], &show[..], &["store", "check", "--config", cfg][..]] {
        let o = tradebot(args, &[]);
        assert_eq!(o.status.code(), Some(65), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("tradebot store restore --config FILE"), "{args:?}: {}", text(&o));
    }
    let o = tradebot(&["store", "restore", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("restored") && text(&o).contains("records"), "{}", text(&o));
    let o = tradebot(&show, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 6, "header and five days: {}", text(&o));
    let o = tradebot(&["store", "check", "--config", cfg], &[]);
    assert!(o.status.success() && text(&o).contains("healthy"), "{}", text(&o));
}

#[test]
fn read_only_commands_report_a_missing_state_dir_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // The demo's relative state_dir, from a directory where it does not exist.
    let cfg = write_config(dir.path(), &std::fs::read_to_string(root().join("config/tradebot.toml")).unwrap());
    let cfg = cfg.to_str().unwrap();
    let cwd = std::fs::canonicalize(elsewhere.path()).unwrap();
    let commands: [&[&str]; 9] = [
        &["status"],
        &["models", "list"],
        &["models", "show", "ppo-0000000000000000"],
        &["store", "list"],
        &["store", "check"],
        &["risk", "status"],
        &["data", "show", "AAPL", "--from", "2012-01-03", "--to", "2012-01-04"],
        &["tune", "list"],
        &["tune", "show"],
    ];
    for args in commands {
        let mut all = args.to_vec();
        all.extend(["--config", cfg]);
        let o = common::command(&all).current_dir(&cwd).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&format!("the state directory {}/var does not exist", cwd.display())), "{args:?}: {err}");
        assert!(err.contains(&format!("taken from the working directory {}", cwd.display())), "{args:?}: {err}");
        let created: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
        assert!(created.is_empty(), "{args:?} created {created:?}");
    }
}

/// Every file of the store (the database, its sentinel, backups) and its bytes' CRC-32; the lock file aside.
fn store_files(dir: &Path) -> std::collections::BTreeMap<PathBuf, u32> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with(tradebot::store::LOCK_FILE) {
                out.insert(p.clone(), crc32fast::hash(&std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// `tradebot ARGS`, killed after `secs` (then `None`).
fn tradebot_within(args: &[&str], secs: u64) -> Option<Output> {
    let mut child = common::command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(child.wait_with_output().unwrap())
}

#[test]
fn status_changes_no_store_file_and_status_and_run_refuse_what_store_check_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let state = dir.path().join("state");
    let before = store_files(&state);
    for args in [&["status", "--config", cfg][..], &["risk", "status", "--config", cfg][..]] {
        let o = tradebot(args, &[]);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert_eq!(store_files(&state), before, "{args:?} changed the store");
    }
    // Damage only a full read finds: a record sled holds intact but that does not decode as a bar.
    {
        let db = sled::open(state.join("db")).unwrap();
        db.open_tree("bars").unwrap().insert(b"garbage", b"not a bar".as_slice()).unwrap();
        db.flush().unwrap();
    }
    let o = tradebot(&["store", "check", "--config", cfg], &[]);
    assert_eq!(o.status.code(), Some(65), "{}", text(&o));
    let refusal = String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or_default().to_string();
    assert!(refusal.contains("corrupt record in tree bars"), "{}", text(&o));
    let run =
        tradebot_within(&["run", "--config", cfg], 120).expect("run refuses the store at once, it does not trade");
    for (what, o) in [("status", tradebot(&["status", "--config", cfg], &[])), ("run", run)] {
        assert_eq!(o.status.code(), Some(65), "{what}: {}", text(&o));
        assert!(text(&o).contains(&refusal), "{what} says what `store check` says ({refusal}): {}", text(&o));
    }
}

/// A tmpfs of `size` mounted at `at` (unmounted when dropped). CI runs as root, as do the test machines.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("mount runs");
        assert!(
            o.status.success(),
            "this test mounts a small tmpfs to fill it, which needs root (CI runs as root): {}",
            text(&o)
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_state_dir_that_cannot_be_created_exits_73_naming_it_and_the_fix() {
    // Below a regular file: no directory can be made there, by root either (CI runs as root, for whom a
    // read-only mode would not stop anything).
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "a file, not a directory").unwrap();
    let p = write_config(dir.path(), &demo_config(&blocker));
    let o = tradebot(&["run", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(73), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let state = blocker.join("state").display().to_string();
    assert!(err.contains(&format!("state_dir = {state:?} cannot be used: cannot create it")), "{err}");
    assert!(err.contains("install -d -o $(id -un)"), "{err}");
}

#[test]
fn a_start_on_a_full_disk_exits_74_naming_it_and_the_next_start_after_space_is_freed_works() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&dir.path().join("disk"), "16m");
    let cfg = write_config(dir.path(), &demo_config(&disk.0));
    let cfg = cfg.to_str().unwrap();
    let state = disk.0.join("state");
    let filler = disk.0.join("filler");
    // A temporary directory on the same small disk (made while it has room).
    let tmp = disk.0.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // 64 KiB left (the new store opens; the start fails importing the bars), 8 KiB left (sled's log write
    // fails at open), and full to the last byte (sled cannot write its settings).
    for free_kib in [64u64, 8, 0] {
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&filler).unwrap();
            let block = vec![0u8; 1024];
            while f.write_all(&block).is_ok() {}
            let _ = f.flush();
            f.set_len(f.metadata().unwrap().len().saturating_sub(free_kib * 1024)).unwrap();
        }
        let o = tradebot_within(&["run", "--config", cfg], 120).expect("a full disk is reported at once");
        let t = text(&o);
        assert_eq!(o.status.code(), Some(74), "{free_kib} KiB free: {t}");
        assert!(t.contains(&format!("the disk holding the store at {} is full", state.display())), "{t}");
        assert!(t.contains(" free)") && t.contains("free some space"), "{t}");
        assert!(!t.contains("panicked") && !t.contains("store restore"), "{t}");
        if free_kib == 0 {
            // A check writes nothing beside the store: it reads a full disk's store as any other.
            let o = tradebot(&["store", "check", "--config", cfg], &[]);
            assert!(o.status.success() && text(&o).contains("healthy"), "check on a full disk: {}", text(&o));
            // Its private copy needs room in the temporary directory: none there is exit 74, naming it.
            let o = tradebot(&["store", "check", "--config", cfg], &[("TMPDIR", tmp.to_str().unwrap())]);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(74), "check needs room for its copy: {t}");
            assert!(t.contains(&format!("no room in {} for a private copy", tmp.display())), "{t}");
            assert!(t.contains("point TMPDIR at a disk with room"), "{t}");
        }
        std::fs::remove_file(&filler).unwrap();
        let o = tradebot(&["store", "check", "--config", cfg], &[]);
        assert!(o.status.success() && text(&o).contains("healthy"), "{free_kib} KiB free, then freed: {}", text(&o));
    }
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "the next start works: {}", text(&o));
    let o = tradebot(&["status", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let leftovers: Vec<_> = std::fs::read_dir(state.join("db"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".generating"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_restore_says_when_it_brings_back_a_different_kill_switch_and_keeps_it_tripped() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["store", "backup", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    {
        // Tripped after the backup.
        let store = tradebot::store::Store::open(&dir.path().join("state")).unwrap();
        let kv = store.tree::<serde_json::Value>(tradebot::store::TreeName::Kv).unwrap();
        let at = "2026-03-02T15:00:00Z";
        kv.insert(b"risk.kill_switch", &serde_json::json!({"tripped_at": at, "reason": "daily loss"})).unwrap();
    }
    let o = tradebot(&["store", "restore", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("WARNING: the backup's kill switch is clear"), "{out}");
    assert!(out.contains("tripped at 2026-03-02T15:00:00Z (daily loss): it is kept tripped"), "{out}");
    let store = tradebot::store::Store::open_read_only(&dir.path().join("state")).unwrap();
    let kv = store.tree::<serde_json::Value>(tradebot::store::TreeName::Kv).unwrap();
    assert!(kv.get(b"risk.kill_switch").unwrap().is_some(), "the restored store's switch is tripped");
}
