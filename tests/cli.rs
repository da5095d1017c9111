//! The `tradebot` binary end to end: config check and its exit codes, secrets never printed, data import
//! and show across the AAPL split, the live gate, and the store lock.

mod common;

use common::{demo_config, root, text, write_config};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A copy of the demo config with its state under `dir`, and extra lines appended.
fn config_in(dir: &Path, extra_top: &str, extra_end: &str) -> PathBuf {
    write_config(dir, &format!("{extra_top}\n{}\n{extra_end}", demo_config(dir)))
}

fn tradebot(args: &[&str], envs: &[(&str, &str)]) -> Output {
    common::tradebot_env(args, envs)
}

#[test]
fn config_check_passes_on_the_demo_and_masks_secrets() {
    let secret = "SUPERSECRET-7f3a9c";
    let o = tradebot(
        &["config", "check", "config/tradebot.toml"],
        &[("APCA_API_KEY_ID", "PKKEYID-0042"), ("APCA_API_SECRET_KEY", secret), ("RUST_LOG", "trace")],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("trading_url = \"https://paper-api.alpaca.markets/\""), "{out}");
    assert!(out.contains("Alpaca keys: found in environment"), "{out}");
    assert!(!out.contains(secret) && !out.contains("PKKEYID-0042"), "a secret leaked:\n{out}");
}

#[test]
fn out_of_range_config_exits_78_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = config_in(dir.path(), "", "");
    let bad = std::fs::read_to_string(&p).unwrap().replace("max_position_pct = 0.4", "max_position_pct = 1.5");
    std::fs::write(&p, bad).unwrap();
    let o = tradebot(&["config", "check", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}: risk.max_position_pct = 1.5: must be in (0, 1]", p.display())), "{err}");
}

#[test]
fn import_then_show_has_no_split_jump() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("AAPL: 3270 bars"), "{}", text(&o));
    let o = tradebot(
        &["data", "show", "AAPL", "--from", "2005-02-24", "--to", "2005-03-02", "--json", "--config", cfg],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let days: Vec<&str> = rows.iter().map(|r| &r["t"].as_str().unwrap()[..10]).collect();
    assert_eq!(days, ["2005-02-24", "2005-02-25", "2005-02-28", "2005-03-01", "2005-03-02"]);
    for w in rows.windows(2) {
        let change = w[1]["c"].as_f64().unwrap() / w[0]["c"].as_f64().unwrap() - 1.0;
        assert!(change.abs() < 0.05, "jump of {change} between {} and {}", w[0]["t"], w[1]["t"]);
        for k in ["o", "h", "l", "c", "v"] {
            assert!(w[1][k].is_number(), "{k} missing");
        }
    }
    assert!(
        text(&tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]))
            .contains("read data/stocks-daily-2000-2013.csv.gz as CSV with a Ticker column")
    );
    // `data show --json`'s own output imports back (JSON lines of Alpaca bars), into another store, as the
    // same bars.
    let jsonl = dir.path().join("aapl.jsonl");
    std::fs::write(&jsonl, &o.stdout).unwrap();
    let other = tempfile::tempdir().unwrap();
    let cfg2 = config_in(other.path(), "", "");
    let cfg2 = cfg2.to_str().unwrap();
    let imp = tradebot(&["data", "import", jsonl.to_str().unwrap(), "--symbol", "AAPL", "--config", cfg2], &[]);
    assert!(imp.status.success(), "{}", text(&imp));
    assert!(
        text(&imp).contains("as JSON lines of Alpaca bars") && text(&imp).contains("AAPL: 5 bars"),
        "{}",
        text(&imp)
    );
    let again = tradebot(
        &["data", "show", "AAPL", "--from", "2005-02-24", "--to", "2005-03-02", "--json", "--config", cfg2],
        &[],
    );
    assert_eq!(String::from_utf8_lossy(&again.stdout), String::from_utf8_lossy(&o.stdout));
}

#[test]
fn bad_rows_exit_65_with_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, "Date,Open,High,Low,Close,Volume\n2020-01-02,1,2,0.5,1.5,10\n2020-01-03,1,2,0.5,NaN,10\n")
        .unwrap();
    let o =
        tradebot(&["data", "import", csv.to_str().unwrap(), "--symbol", "XYZ", "--config", cfg.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(65), "{}", text(&o));
    assert!(text(&o).contains("x.csv:3: close is NaN"), "{}", text(&o));
    assert!(text(&o).contains("XYZ: 1 bars"), "{}", text(&o));
}

#[test]
fn live_gate_needs_both_config_and_flag() {
    let dir = tempfile::tempdir().unwrap();
    let paper = config_in(dir.path(), "", "");
    let o = tradebot(&["run", "--config", paper.to_str().unwrap(), "--live"], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("--live was given but mode = \"paper\""), "{}", text(&o));

    let live_text = std::fs::read_to_string(root().join("config/alpaca-live.toml.example")).unwrap();
    let live = dir.path().join("live.toml");
    std::fs::write(&live, live_text.replace("/var/lib/tradebot", &dir.path().join("s").display().to_string())).unwrap();
    let o = tradebot(&["run", "--config", live.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("add --live to the command line"), "{}", text(&o));
}

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
fn models_commands_promote_and_roll_back() {
    use tradebot::models::{FeatureRef, Manifest, ModelKind, Registry};
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let reg = Registry::open(&dir.path().join("state/models")).unwrap();
    let features = FeatureRef { version: 1, names: vec!["f".into()] };
    let draft =
        |kind| Manifest::draft(kind, features.clone(), vec![], vec![], vec![], tradebot::domain::Timeframe::DAY1);
    let a = reg.add(b"model a", draft(ModelKind::Ppo)).unwrap();
    let b = reg.add(b"model b", draft(ModelKind::Ppo)).unwrap();
    for id in [&a.id, &b.id] {
        let o = tradebot(&["models", "promote", id, "--config", cfg], &[]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = tradebot(&["models", "list", "--config", cfg], &[]);
    let out = text(&o);
    assert!(out.lines().any(|l| l.starts_with(&b.id) && l.contains("champion")), "{out}");
    assert!(out.lines().any(|l| l.starts_with(&a.id) && l.contains("retired")), "{out}");
    let o = tradebot(&["models", "rollback", "ppo", "--config", cfg], &[]);
    assert!(text(&o).contains(&format!("rolled back: {} is the ppo champion again", a.id)), "{}", text(&o));
    // A second rollback goes further back (there is nothing before A), never back to B.
    let o = tradebot(&["models", "rollback", "ppo", "--config", cfg], &[]);
    assert!(!o.status.success() && text(&o).contains("no earlier ppo champion"), "{}", text(&o));
    let o = tradebot(&["models", "show", "ppo-0000000000000000", "--config", cfg], &[]);
    assert!(!o.status.success() && text(&o).contains("no such model"), "{}", text(&o));
}

#[test]
fn bench_env_prints_throughput_as_json_and_refuses_bad_arguments() {
    for extra in [&[][..], &["--finrl"][..]] {
        let mut args = vec!["bench", "env", "--envs", "3", "--assets", "4", "--steps", "50", "--days", "40"];
        args.extend_from_slice(&["--episode-len", "20", "--json"]);
        args.extend_from_slice(extra);
        let o = tradebot(&args, &[]);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        // 50 steps take microseconds: they are run again until 0.5 s have passed (--min-seconds).
        let steps = v["steps"].as_u64().unwrap();
        assert_eq!((v["envs"].as_u64(), v["assets"].as_u64(), steps % 50), (Some(3), Some(4), 0), "{v}");
        assert!(steps > 50 && v["seconds"].as_f64().unwrap() >= 0.5, "not lengthened to 0.5 s: {v}");
        let env_rate = v["env_steps_per_s"].as_f64().unwrap();
        assert!(env_rate.is_finite() && env_rate > 0.0, "{v}");
    }
    let o = tradebot(
        &[
            &["bench", "env", "--steps", "50", "--days", "40", "--episode-len", "20"][..],
            &["--min-seconds", "0", "--json"],
        ]
        .concat(),
        &[],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps"].as_u64(), Some(50), "--min-seconds 0 times --steps once: {v}");
    let o = tradebot(&["bench", "env", "--device", "tpu"], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--device \"tpu\": must be cpu or cuda"), "{}", text(&o));
    let o = tradebot(&["bench", "env", "--days", "10", "--episode-len", "10"], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("episode_len = 10"), "{}", text(&o));
    // The tensor env (`tch`) left the library: the kernel is the env on a device.
    let o = tradebot(&["bench", "env", "--backend", "tch", "--steps", "1"], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--backend \"tch\": must be rust or kernel"), "{}", text(&o));
}

/// Dates `data show` cannot use (past chrono's range, not a date, from after to) are refused naming the
/// flag, never a panic.
#[test]
fn data_show_refuses_bad_dates_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    for (from, to, needle) in [
        ("2005-01-01", "262143-12-31", "--to \"262143-12-31\" is not a date"),
        ("2005-13-01", "2005-01-10", "--from \"2005-13-01\" is not a date"),
        ("2005-02-01", "2005-01-10", "is after --to"),
    ] {
        let o = tradebot(&["data", "show", "AAPL", "--from", from, "--to", to, "--config", cfg], &[]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains(needle), "{needle}: {}", text(&o));
    }
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
fn a_closed_pipe_ends_output_quietly_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    for args in [
        &["data", "show", "AAPL", "--from", "2000-01-01", "--to", "2013-12-31", "--config", cfg][..],
        &["status", "--config", cfg][..],
    ] {
        let mut child = common::command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away before (or while) it writes: `| head -0`
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
    }
}

#[test]
fn outside_a_checkout_doctor_runs_without_a_config_and_status_says_how_to_name_one() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| common::command(args).current_dir(dir.path()).output().unwrap();
    if std::path::Path::new("/etc/tradebot/tradebot.toml").exists() {
        panic!("/etc/tradebot/tradebot.toml exists on this machine: this test needs a machine without it");
    }
    let o = run(&["doctor"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("config:        none found") && text(&o).contains("onnxruntime:"), "{}", text(&o));
    let o = run(&["status"]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    // No file named as if it existed: the places searched, absolute, and how to point at a config.
    assert!(!err.contains("/etc/tradebot/tradebot.toml:"), "{err}");
    assert!(err.starts_with("no config file found; searched $TRADEBOT_CONFIG (not set), "), "{err}");
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert!(err.contains(&format!("{}/config/tradebot.toml", cwd.display())), "{err}");
    assert!(err.contains("Point at one with --config FILE or TRADEBOT_CONFIG=FILE"), "{err}");
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

#[test]
fn models_seed_crowns_no_shipped_model_that_does_not_fit_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let text_cfg =
        std::fs::read_to_string(&cfg).unwrap().replace("[\"AAPL\", \"MSFT\", \"IBM\"]", "[\"SPY\", \"QQQ\"]");
    std::fs::write(&cfg, text_cfg).unwrap();
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["models", "seed", "--config", cfg], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("new champions: none"), "{}", text(&o));
    assert!(err.contains("not made champion: ppo-") && err.contains(&format!("does not fit {cfg}")), "{err}");
    assert!(err.contains("train one for this config with `tradebot train ppo"), "{err}");
    let o = tradebot(&["models", "list", "--config", cfg], &[]);
    assert!(!text(&o).contains("champion"), "a misfit shipped model was crowned: {}", text(&o));
}

#[test]
fn doctor_names_the_config_and_the_gpu_and_doctor_gpu_fails_in_seconds_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let o = tradebot(&["doctor", "--config", cfg.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains(&format!("config:        {}", cfg.display())), "the config's path: {out}");
    for label in ["cuda driver:", "nvrtc:", "nvml:", "libtorch cuda:", "gpu:"] {
        assert!(out.lines().any(|l| l.starts_with(label)), "no {label:?} line: {out}");
    }
    let verdict = out.lines().find_map(|l| l.strip_prefix("gpu:")).unwrap().trim().to_string();
    let started = std::time::Instant::now();
    let o = tradebot(&["doctor", "--gpu", "--config", cfg.to_str().unwrap()], &[]);
    let secs = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    if verdict == "ok" {
        assert!(o.status.success(), "{}", text(&o));
        assert!(out.lines().any(|l| l.starts_with("cuda device:") && l.contains("compute capability")), "{out}");
    } else {
        // Without a GPU (this CI): "no GPU: <reason>" (the reason doctor printed) and exit 1, in seconds.
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let line = err.lines().last().unwrap_or_default();
        assert!(line.starts_with("no GPU: ") || line.starts_with("GPU not usable: "), "{err}");
        if !Path::new("/dev/nvidiactl").exists() {
            assert!(line.starts_with("no GPU: "), "no NVIDIA device files here: {err}");
        }
        assert!(verdict.starts_with(line), "doctor and doctor --gpu give one reason: {verdict:?} vs {line:?}");
        assert!(secs < 30.0, "doctor --gpu took {secs:.1} s");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn config_check_output_parses_back_and_a_missing_feed_file_exits_78() {
    let dir = tempfile::tempdir().unwrap();
    let p = config_in(dir.path(), "", "");
    let o = tradebot(&["config", "check", "--config", p.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    // The effective configuration is itself a valid config (the comment line at the end included).
    let effective = dir.path().join("effective.toml");
    std::fs::write(&effective, &o.stdout).unwrap();
    let again = tradebot(&["config", "check", effective.to_str().unwrap()], &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(String::from_utf8_lossy(&again.stdout), String::from_utf8_lossy(&o.stdout));

    let moved = std::fs::read_to_string(&p).unwrap().replace("data/stocks-daily", "data/no-such");
    std::fs::write(&p, moved).unwrap();
    let o = tradebot(&["config", "check", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("feed.file = \"data/no-such-2000-2013.csv.gz\": no such file"), "{}", text(&o));
}

#[test]
fn a_training_child_caps_its_own_memory_at_the_budget_the_daemon_passes() {
    // Started as the daemon starts it (our pid as its parent's): the kernel's limit on the running
    // trainer's data segment is the budget, read from /proc while it trains, not from its log.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let me = std::process::id().to_string();
    let mut child = common::Reaped(
        common::command(&["train", "ppo", "--config", cfg.to_str().unwrap()])
            .env("TRADEBOT_PARENT_PID", &me)
            .env("TRADEBOT_TRAIN_MEMORY_MB", "4096")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let limits = format!("/proc/{}/limits", child.id());
    let data_limit = |text: &str| {
        let line = text.lines().find(|l| l.starts_with("Max data size")).unwrap_or_default().to_string();
        line.split_whitespace().skip(3).take(2).map(str::to_string).collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    while std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        seen = data_limit(&std::fs::read_to_string(&limits).unwrap_or_default());
        if seen.first().is_some_and(|soft| soft != "unlimited") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    let cap = (4096u64 << 20).to_string();
    assert_eq!(seen, vec![cap.clone(), cap], "the running trainer's RLIMIT_DATA (soft, hard)");

    let missing = root().join("no-such-config.toml");
    let args = ["train", "ppo", "--config", missing.to_str().unwrap()];
    let out = tradebot(&args, &[("TRADEBOT_PARENT_PID", &me), ("TRADEBOT_TRAIN_MEMORY_MB", "lots")]);
    assert!(text(&out).contains("is not a number of MiB"), "{}", text(&out));
    // A training command run by hand has no cap of its own.
    let out = tradebot(&args, &[]);
    assert!(!text(&out).contains("memory capped"), "{}", text(&out));
}

#[test]
fn a_dashboard_off_loopback_without_tls_or_allow_remote_exits_78_naming_the_key_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let p = config_in(dir.path(), "", "");
    let open = std::fs::read_to_string(&p).unwrap().replace("listen = \"127.0.0.1:9187\"", "listen = \"0.0.0.0:9187\"");
    std::fs::write(&p, open).unwrap();
    for args in [&["config", "check", p.to_str().unwrap()][..], &["run", "--config", p.to_str().unwrap()][..]] {
        let o = tradebot(args, &[]);
        assert_eq!(o.status.code(), Some(78), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}: web.listen = \"0.0.0.0:9187\" is not a loopback address", p.display()))
                && err.contains("reverse proxy with TLS")
                && err.contains("web.allow_remote = true"),
            "{args:?}: {err}"
        );
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
fn refused_api_keys_exit_78_after_an_alert_to_the_notify_targets() {
    use std::sync::{Arc, Mutex};
    use tradebot::alpaca::fake::FakeAlpaca;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
    // The webhook: records what it is sent.
    let got = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(body);
                "ok"
            }
        }),
    );
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        &format!(
            "mode = \"paper\"\nstate_dir = {state:?}\n{alpaca}[market]\nsymbols = [\"AAPL\"]\n[feed]\nkind = \"alpaca\"\n\
             [broker]\nkind = \"alpaca\"\n[strategy]\nmode = \"scripted\"\n[web]\nenabled = false\n\
             [notify]\nwebhook_url = {hook:?}\nretries = 0\n",
            state = dir.path().join("state").display().to_string(),
            alpaca = fake.alpaca_section("v2/iex"),
        ),
    );
    let o = tradebot(
        &["run", "--config", cfg.to_str().unwrap()],
        &[("APCA_API_KEY_ID", "WRONGKEY"), ("APCA_API_SECRET_KEY", "wrong-secret")],
    );
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("Alpaca refused the API keys"), "{}", text(&o));
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "one alert before the exit: {got:?}");
    let alert: serde_json::Value = serde_json::from_str(&got[0]).unwrap();
    assert_eq!(alert["event"], "fatal", "{alert}");
    assert!(alert["text"].as_str().unwrap().contains("Alpaca refused the API keys"), "{alert}");
    assert!(!got[0].contains("wrong-secret"), "a secret in the alert: {}", got[0]);
}

#[test]
fn missing_api_keys_and_a_missing_alert_secret_exit_78_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    // The live runner without keys.
    let p = config_in(dir.path(), "", "");
    let alpaca = std::fs::read_to_string(&p)
        .unwrap()
        .replace("kind = \"replay\"", "kind = \"alpaca\"")
        .replace("kind = \"sim\"", "kind = \"alpaca\"");
    std::fs::write(&p, alpaca).unwrap();
    let o = tradebot(&["run", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: feed.kind / broker.kind = \"alpaca\" needs APCA_API_KEY_ID", p.display())));
    // A Telegram chat without its bot token.
    let p = config_in(dir.path(), "", "");
    let telegram =
        std::fs::read_to_string(&p).unwrap().replace("# telegram_chat_id = \"123456789\"", "telegram_chat_id = \"42\"");
    std::fs::write(&p, telegram).unwrap();
    let o = tradebot(&["run", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("[notify]: notify.telegram_chat_id is set but no bot token"), "{}", text(&o));
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

/// Every command that prints, run with its stdout a pipe whose reader is gone and then with its stdout on
/// `/dev/full`: the first ends quietly with exit 0 (as `status | head -1` always did), the second fails
/// with exit 74 naming stdout and the cause; neither panics (`println!` did: exit 101 and a backtrace).
#[test]
fn every_command_ends_quietly_on_a_closed_pipe_and_fails_clearly_on_a_full_stdout() {
    use tradebot::models::{FeatureRef, Manifest, ModelKind, Registry};
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let reg = Registry::open(&dir.path().join("state/models")).unwrap();
    let features = FeatureRef { version: 1, names: vec!["f".into()] };
    let m = Manifest::draft(ModelKind::Ppo, features, vec![], vec![], vec![], tradebot::domain::Timeframe::DAY1);
    let id = reg.add(b"model a", m).unwrap().id;
    let commands: [&[&str]; 14] = [
        &["models", "list", "--config", cfg],
        &["models", "list", "--json", "--config", cfg],
        &["models", "show", &id, "--config", cfg],
        &["store", "list", "--config", cfg],
        &["store", "check", "--config", cfg],
        &["tune", "list", "--json", "--config", cfg],
        &["status", "--config", cfg],
        &["status", "--json", "--config", cfg],
        &["risk", "status", "--config", cfg],
        &["data", "show", "AAPL", "--from", "2000-01-01", "--to", "2000-12-31", "--config", cfg],
        &["config", "check", cfg],
        &["doctor", "--config", cfg],
        &["--help"],
        &["--version"],
    ];
    for args in commands {
        // A pipe whose read end is closed before the child starts: its first write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = common::command(args).stdout(writer).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?} into a closed pipe: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?} into a closed pipe: {err}");

        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = common::command(args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?} > /dev/full: {err}");
        assert_eq!(o.status.code(), Some(74), "{args:?} > /dev/full: {err}");
        assert!(
            err.contains("cannot write to stdout") && err.contains("No space left on device"),
            "{args:?} > /dev/full names stdout and the cause: {err}"
        );
    }
}

/// Issue 36: an error says its cause once (`data import` of a missing file said the OS error twice), and
/// a backtest over a reversed or empty window says which window and the fix in one line, not "only 49
/// bars common to all of …" under a bare "error: backtest / caused by:".
#[test]
fn errors_name_the_thing_once_and_backtest_windows_say_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "/nonexistent.csv", "--config", cfg], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "the OS error once:\n{err}");
    assert!(err.contains("/nonexistent.csv"), "{err}");

    let o = tradebot(&["models", "seed", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stderr).lines().filter(|l| !l.contains(" INFO ")).map(str::to_string).collect()
    };
    let o = tradebot(&["backtest", "--config", cfg, "--from", "2013-03-01", "--to", "2012-01-01"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        vec![
            "error: the backtest window 2013-03-01 to 2012-01-01 is reversed: its first day (--from) is after its last (--to); swap them"
        ]
    );
    let o = tradebot(&["backtest", "--config", cfg, "--from", "2020-03-01", "--to", "2021-01-01"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        vec![
            "error: no bars of AAPL, MSFT, IBM (common to all of them) in the backtest window 2020-03-01 to 2021-01-01; the stored ones run from 2000-03-01 to 2013-03-01: pick --from/--to within them, or import data (`tradebot data import`)"
        ]
    );
}

/// Issue 37: `backtest --report` writes one self-contained page whose numbers are the backtest's own (its
/// JSON embedded as `--json` prints it, the figures table formatted from it), and `--trades` the fills.
#[test]
fn backtest_writes_a_tear_sheet_with_its_own_numbers_and_the_fills_as_csv() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let o = tradebot(&["models", "seed", "--config", cfg.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let (page, csv) = (dir.path().join("report.html"), dir.path().join("trades.csv"));
    let args = ["backtest", "--from", "2012-01-03", "--to", "2012-06-29", "--json", "--config", cfg.to_str().unwrap()];
    let o =
        tradebot(&[&args[..], &["--report", page.to_str().unwrap(), "--trades", csv.to_str().unwrap()]].concat(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    let start = html.find("<script type=\"application/json\" id=\"report\">").expect("the report's JSON is embedded");
    let body = &html[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let embedded: serde_json::Value = serde_json::from_str(&body.replace("<\\/", "</")).unwrap();
    assert_eq!(embedded, printed, "the page carries the backtest's own numbers");
    let total = printed["strategy"]["total_return"].as_f64().unwrap();
    assert!(html.contains(&format!("<tr><th>total return</th><td>{:.2}%</td>", total * 100.0)), "the figures table");
    for part in ["<svg", "id=\"months\"", "id=\"symbols\"", "id=\"trades\"", "Rolling Sharpe"] {
        assert!(html.contains(part), "the page lacks {part}");
    }
    assert!(!html.contains("<script src") && !html.contains("<link") && !html.contains("<img"), "self-contained");
    let rows: Vec<String> = std::fs::read_to_string(&csv).unwrap().lines().map(str::to_string).collect();
    assert_eq!(rows[0], "time,symbol,side,qty,price,notional,client_order_id");
    let trades = printed["strategy"]["trades"].as_u64().unwrap() as usize;
    assert!(trades > 0, "the demo window trades");
    assert_eq!(rows.len() - 1, trades, "one CSV row per fill the backtest counted");
    assert!(rows[1..].iter().all(|r| r.split(',').count() == 7 && r.contains(",tb-")), "{rows:?}");
}
