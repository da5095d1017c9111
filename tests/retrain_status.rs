//! `tradebot status` and `tradebot retrain` through the binary: without a daemon (the state directory's
//! view; a foreground retrain whose child fails leaves the champion and is recorded), and against a
//! control server started here, standing in for the daemon.

mod common;

use common::{command, demo_config, text, tradebot, write_config};

use chrono::Utc;
use std::path::{Path, PathBuf};
use tradebot::control::report::{ModelsStatus, RetrainStatus};
use tradebot::control::{Request, Response, StatusReport, server, socket_path};
use tradebot::domain::{Symbol, Timeframe};
use tradebot::models::{FeatureRef, Manifest, ModelKind, Registry, TensorSpec};
use tradebot::retrain::{RunOutcome, RunRecord, record};
use tradebot::store::Store;

/// The demo config with its state under `dir`, only AAPL, and a 2 s training budget.
fn config_in(dir: &Path) -> PathBuf {
    let demo = demo_config(dir).replacen("\ntune = true ", "\ntune = false ", 1);
    assert!(demo.contains("\ntune = false "), "the demo config's retrain.tune line changed");
    assert!(demo.contains("time_budget_secs = 600 "), "the demo config's retrain budget line changed");
    write_config(dir, &demo.replace("time_budget_secs = 600 ", "time_budget_secs = 2 "))
}

fn draft(kind: ModelKind) -> Manifest {
    Manifest::draft(
        kind,
        FeatureRef { version: 1, names: vec!["ret_1".into()] },
        vec![TensorSpec { name: "obs".into(), shape: vec![-1, 3] }],
        vec![TensorSpec { name: "action".into(), shape: vec![-1, 1] }],
        vec![Symbol::new("AAPL").unwrap()],
        Timeframe::DAY1,
    )
}

fn seed_champion(state: &Path) -> String {
    let reg = Registry::open(&state.join("models")).unwrap();
    let m = reg.add(b"shipped ppo", draft(ModelKind::Ppo)).unwrap();
    reg.promote(&m.id, "seed").unwrap().id
}

#[test]
fn without_a_daemon_status_reads_the_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path());
    let state = dir.path().join("state");
    let champ = seed_champion(&state);
    {
        let store = Store::open(&state).unwrap();
        let t = Utc::now();
        let r: RunRecord = serde_json::from_value(serde_json::json!({
            "id": "ppo-test", "kind": "ppo", "trigger": "schedule", "clock_time": t, "started_at": t, "ended_at": t,
            "outcome": "kept", "failure": null, "snapshot": null, "candidate": "ppo-cand", "champion_before": champ,
            "champion_after": champ, "train_metrics": {}, "candidate_metrics": null, "champion_metrics": null,
            "decision": {"promote": false, "reason": "candidate Sharpe 0.9 does not beat", "numbers": {"candidate_sharpe": 0.9}}
        }))
        .unwrap();
        record::save(&store, &r).unwrap();
        // Two stored orders (one still open), a position, and the daemon's last published status.
        let order = |id: &str, status: &str| {
            serde_json::json!({
                "client_order_id": id, "broker_id": null, "symbol": "AAPL", "side": "buy", "qty": "3",
                "filled_qty": "0", "avg_fill_price": null, "status": status, "bar_time": t, "recorded_at": t,
                "updated_at": t, "adopted": false, "note": null
            })
        };
        let orders = store.tree::<serde_json::Value>(tradebot::store::TreeName::Orders).unwrap();
        orders.insert(b"tb-open-1", &order("tb-open-1", "accepted")).unwrap();
        orders.insert(b"tb-done-1", &order("tb-done-1", "filled")).unwrap();
        let positions = store.tree::<serde_json::Value>(tradebot::store::TreeName::Positions).unwrap();
        positions.insert(b"AAPL", &serde_json::json!({"qty": "5", "adjustment": "0", "updated_at": t})).unwrap();
        let published = StatusReport {
            daemon_running: true,
            equity: 101_234.5,
            cash: 99_000.0,
            positions: vec![tradebot::control::report::PositionStatus {
                symbol: "AAPL".into(),
                qty: 5.0,
                price: 187.25,
                value: 936.25,
            }],
            ..Default::default()
        };
        tradebot::keep_published(&store, &published, t).unwrap();
    }
    let o = tradebot(&["status", "--config", cfg.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let s: StatusReport = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!s.daemon_running && s.activity.contains("not running"), "{s:?}");
    assert_eq!(s.version, tradebot::control::report::STATUS_VERSION);
    assert_eq!(s.models.ppo.as_deref(), Some(champ.as_str()));
    assert_eq!(s.models.lstm, None);
    let last = s.models.last_retrain.as_ref().unwrap();
    assert_eq!((last.outcome.as_str(), last.candidate.as_deref()), ("kept", Some("ppo-cand")));
    assert_eq!(last.numbers["candidate_sharpe"], 0.9);
    assert!(s.models.next_retrain.is_some_and(|t| t > Utc::now()));
    let open: Vec<&str> = s.open_orders.iter().map(|o| o.client_order_id.as_str()).collect();
    assert_eq!(open, ["tb-open-1"], "the stored open orders, not the filled one");
    assert_eq!((s.equity, s.cash), (101_234.5, 99_000.0), "the last published equity and cash");
    assert!(s.as_of.is_some(), "marked with when the daemon published them");
    let aapl = s.positions.iter().find(|p| p.symbol == "AAPL").unwrap();
    assert_eq!((aapl.qty, aapl.price), (5.0, 187.25), "the stored position at the last published price");

    let o = tradebot(&["status", "--config", cfg.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("daemon:      not running") && out.contains(&format!("ppo {champ}")), "{out}");
    assert!(out.contains("kept (candidate ppo-cand): candidate Sharpe 0.9 does not beat"), "{out}");
    assert!(out.contains("open orders: 1") && out.contains("tb-open-1 AAPL buy 3 accepted"), "{out}");
    assert!(out.contains("equity:      101234.50") && out.contains("as of"), "{out}");
}

#[test]
fn offline_status_shows_the_positions_of_the_state_its_equity_comes_from_and_a_run_under_way_without_a_dangling_colon()
{
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path());
    let state = dir.path().join("state");
    seed_champion(&state);
    {
        let store = Store::open(&state).unwrap();
        let t = Utc::now();
        // A replay: its positions live in its own account store; the daemon's store has none, and the
        // published status (equity, cash and positions) is the replay's.
        let published = StatusReport {
            daemon_running: true,
            equity: 108_351.0,
            cash: 59_247.0,
            positions: vec![tradebot::control::report::PositionStatus {
                symbol: "MSFT".into(),
                qty: 120.0,
                price: 410.5,
                value: 49_260.0,
            }],
            ..Default::default()
        };
        tradebot::keep_published(&store, &published, t).unwrap();
        let r: RunRecord = serde_json::from_value(serde_json::json!({
            "id": "ppo-now", "kind": "ppo", "trigger": "schedule", "clock_time": t, "started_at": t, "ended_at": t,
            "outcome": "running", "failure": null, "snapshot": null, "candidate": null, "champion_before": null,
            "champion_after": null, "train_metrics": {}, "candidate_metrics": null, "champion_metrics": null,
            "decision": null
        }))
        .unwrap();
        record::save(&store, &r).unwrap();
    }
    let o = tradebot(&["status", "--config", cfg.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let s: StatusReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((s.equity, s.cash), (108_351.0, 59_247.0));
    let held: Vec<(&str, f64)> = s.positions.iter().map(|p| (p.symbol.as_str(), p.qty)).collect();
    assert_eq!(held, [("MSFT", 120.0)], "the positions behind the published equity, not \"none\"");
    let o = tradebot(&["status", "--config", cfg.to_str().unwrap()]);
    let out = text(&o);
    assert!(out.contains("MSFT") && !out.contains("positions:   none"), "{out}");
    let line = out.lines().find(|l| l.contains("last retrain")).unwrap();
    assert!(line.trim_end().ends_with("running"), "no dangling colon: {line:?}");
}

#[test]
fn without_a_daemon_retrain_runs_in_the_foreground_and_a_failure_keeps_the_champion() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path());
    let state = dir.path().join("state");
    let champ = seed_champion(&state);
    let o = tradebot(&["retrain", "--config", cfg.to_str().unwrap(), "--kind", "ppo", "--json"]);
    let out = text(&o);
    // This build's training child cannot produce a promotable model within 2 s without a backtest.
    assert_eq!(o.status.code(), Some(1), "{out}");
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["event"], "snapshot", "{out}");
    assert!(lines[0]["bars"].as_u64().unwrap() > 2000, "the training window of the shipped data: {out}");
    let last = lines.last().unwrap();
    assert_eq!((last["event"].as_str(), last["record"]["outcome"].as_str()), (Some("finished"), Some("failed")));
    let reg = Registry::open(&state.join("models")).unwrap();
    assert_eq!(reg.champion(ModelKind::Ppo).unwrap().map(|m| m.id), Some(champ.clone()));
    let store = Store::open(&state).unwrap();
    let runs = record::list(&store).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].outcome, runs[0].champion_after.as_deref()), (RunOutcome::Failed, Some(champ.as_str())));
    assert!(runs[0].failure.is_some(), "{:?}", runs[0]);
}

#[test]
fn with_a_daemon_both_commands_ask_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path());
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = rt.block_on(async { server::bind(&socket_path(&state)) }).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<server::Call>(4);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let srv = rt.spawn(server::serve(listener, tx, async {
        let _ = stop_rx.await;
    }));
    let report = StatusReport {
        version: 1,
        daemon_running: true,
        mode: "paper".into(),
        pid: 4242,
        activity: "trading".into(),
        equity: 100_250.5,
        models: ModelsStatus {
            ppo: Some("ppo-0123456789abcdef".into()),
            last_retrain: Some(RetrainStatus { outcome: "promoted".into(), ..Default::default() }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = report.clone();
    let engine = rt.spawn(async move {
        let mut seen = Vec::new();
        while let Some((req, reply)) = rx.recv().await {
            seen.push(req.clone());
            let r = match req {
                Request::Status => Response::status(answer.clone()),
                Request::Retrain { kind } => Response::done(format!("retrain of {kind:?} started")),
                _ => Response::error("unexpected"),
            };
            let _ = reply.send(r);
        }
        seen
    });
    let c = cfg.to_str().unwrap();
    let o = tradebot(&["status", "--config", c, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(serde_json::from_slice::<StatusReport>(&o.stdout).unwrap(), report);
    let o = tradebot(&["status", "--config", c]);
    assert!(text(&o).contains("running (pid 4242") && text(&o).contains("100250.50"), "{}", text(&o));
    let o = tradebot(&["retrain", "--config", c, "--kind", "lstm"]);
    assert!(o.status.success() && text(&o).contains("retrain of Some(Lstm) started"), "{}", text(&o));
    assert!(!state.join("db").exists(), "with a daemon, the commands must not open the store");
    let _ = stop_tx.send(());
    rt.block_on(srv).unwrap();
    let seen = rt.block_on(engine).unwrap();
    assert_eq!(seen, vec![Request::Status, Request::Status, Request::Retrain { kind: Some(ModelKind::Lstm) }]);
}

/// The pids of the running processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let mut f = after.split_whitespace();
        let (state, ppid) = (f.next(), f.next().and_then(|p| p.parse::<u32>().ok()));
        if ppid == Some(parent) && state != Some("Z") {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// Starts a foreground `tradebot retrain --kind ppo` with a long budget and waits for its training child.
fn retrain_with_child(cfg: &Path) -> (std::process::Child, u32) {
    let mut parent = command(&["retrain", "--kind", "ppo", "--config", cfg.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(&c) = children_of(parent.id()).first() {
            return (parent, c);
        }
        assert!(parent.try_wait().unwrap().is_none(), "the retrain ended before its child started");
        assert!(std::time::Instant::now() < until, "no training child within 120 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn gone_within(pid: u32, secs: u64) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn the_training_child_dies_with_a_foreground_retrain_on_sigterm_and_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = demo_config(dir.path()).replace("ppo_steps = 32768 ", "ppo_steps = 50000000 ").replacen(
        "\ntune = true ",
        "\ntune = false ",
        1,
    );
    assert!(
        c.contains("ppo_steps = 50000000") && c.contains("\ntune = false "),
        "the demo config's retrain lines changed"
    );
    let cfg = write_config(dir.path(), &c);

    // SIGTERM: the retrain kills its child, records the run as interrupted and exits 143.
    let (mut parent, child) = retrain_with_child(&cfg);
    common::signal(parent.id(), nix::sys::signal::Signal::SIGTERM);
    let status = parent.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status}");
    assert!(gone_within(child, 10), "the training child {child} outlived the retrain");
    {
        let store = Store::open(&state).unwrap();
        let last = record::last(&store).unwrap().expect("the run is recorded");
        assert_eq!(last.outcome, RunOutcome::Interrupted, "{last:?}");
    }

    // SIGKILL: nothing can run in the parent; the kernel kills the child (its parent-death signal), and
    // the run it left as running is recorded as interrupted by the next pipeline.
    let (mut parent, child) = retrain_with_child(&cfg);
    common::signal(parent.id(), nix::sys::signal::Signal::SIGKILL);
    parent.wait().unwrap();
    assert!(gone_within(child, 10), "the training child {child} outlived a SIGKILLed retrain");
    let store = Store::open(&state).unwrap();
    assert_eq!(record::last(&store).unwrap().unwrap().outcome, RunOutcome::Running);
    assert_eq!(record::interrupt_stale(&store).unwrap(), 1);
    assert_eq!(record::last(&store).unwrap().unwrap().outcome, RunOutcome::Interrupted);
}
