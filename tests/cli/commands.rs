//! The other commands: `models` (promote, roll back, seed), `doctor`, `bench env`, a training child's
//! memory cap, and every command's output on a closed pipe or a full stdout.

use super::common::{self, root, text};
use super::{config_in, tradebot};
use std::path::Path;

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
    // The tensor env (`tch`) left the library: the kernel is the env on a device. Refused by the parser,
    // naming the values it takes.
    let o = tradebot(&["bench", "env", "--backend", "tch", "--steps", "1"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("invalid value 'tch' for '--backend <BACKEND>'"), "{}", text(&o));
    assert!(text(&o).contains("[possible values: rust, kernel]"), "{}", text(&o));
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
