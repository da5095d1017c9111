//! A search on Optuna's own storage (issue 38): Optuna's gRPC storage proxy over SQLite on loopback, two
//! `tradebot tune ppo --storage` workers and one Python Optuna worker (`scripts/optuna_peer.py`) on one study.
//! Trial numbers are unique, every trial ends complete, pruned or failed, Python reads our parameters and
//! values, and the best trial is the same from `tradebot tune show --storage` and from Python; a proxy
//! restart mid-search loses no trial and counts none twice; a worker killed mid-trial has its trial failed
//! by the other one. Python with optuna and grpcio comes from the project's venv (`make optuna`); without
//! them these tests fail.
#![cfg(feature = "train")]

mod common;

use common::{command, demo_config, text, tradebot};
use serde_json::Value;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn python() -> PathBuf {
    tradebot::pyenv_python()
}

fn peer() -> PathBuf {
    common::root().join("scripts/optuna_peer.py")
}

/// Optuna's gRPC proxy over the storage `db` (an SQLAlchemy URL) on `port`, answering.
struct Proxy {
    child: Child,
    port: u16,
    db: String,
}

impl Proxy {
    fn sqlite(file: &Path) -> Proxy {
        Proxy::start(&format!("sqlite:///{}", file.display()), free_port())
    }

    fn start(db: &str, port: u16) -> Proxy {
        Proxy::run("proxy", db, port)
    }

    /// The proxy of `optuna_peer.py MODE` (`proxy`, or `lossy-proxy`: it loses its first trial creation's answer).
    fn run(mode: &str, db: &str, port: u16) -> Proxy {
        let check = Command::new(python()).args(["-c", "import optuna, grpc"]).output();
        match check {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!("the venv's Python lacks optuna or grpcio (`make optuna`): {}", text(&o)),
            Err(e) => panic!("{}: {e} (`make venv optuna`)", python().display()),
        }
        let child = Command::new(python())
            .arg(peer())
            .args([mode, &port.to_string(), db])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the proxy starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "Optuna's gRPC proxy did not listen on {port} within 60s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Proxy { child, port, db: db.to_string() }
    }

    fn url(&self) -> String {
        format!("grpc://127.0.0.1:{}", self.port)
    }

    /// Kills the proxy and starts it again on the same port and database.
    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = Proxy::start(&self.db.clone(), self.port);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A small search's config (the one of tests/tune.rs) with its state under `dir`.
fn config(dir: &Path, budget_steps: u64) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut s = demo_config(dir);
    for (a, b) in [
        ("[env]\n", "[env]\nn_envs = 4\nepisode_len = 40\n"),
        // The demo's own search sizing: these tests set their own.
        ("trials = 8\nparallel = 2\nbudget_steps = 32768\nalgorithms = [\"ppo\", \"sac\"]\n", ""),
        (
            "window_days = 3650\nholdout_days = 365",
            "from = \"2005-01-01\"\nto = \"2007-06-30\"\nholdout_from = \"2007-07-01\"\nholdout_to = \"2007-12-31\"",
        ),
    ] {
        assert!(s.contains(a), "the demo config lost {a:?}");
        s = s.replacen(a, b, 1);
    }
    s = s.replacen(
        "[tune]\n",
        &format!(
            "[tune]\nsampler = \"tpe\"\nstartup_trials = 3\nvalidation_days = 60\nbudget_steps = {budget_steps}\n\
             min_steps = 64\nreduction = 3\nseed = 5\n"
        ),
        1,
    );
    s.push_str(
        "\n[tune.space]\nlearning_rate = { kind = \"log\", low = 1e-4, high = 3e-3 }\n\
         n_steps = { kind = \"choice\", values = [8, 16] }\nbatch_size = { kind = \"choice\", values = [16, 32] }\n\
         n_epochs = { kind = \"int\", low = 1, high = 3 }\n",
    );
    let p = dir.join("t.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// A tradebot worker on `study` in the proxy's storage.
fn worker(cfg: &Path, url: &str, study: &str, trials: usize) -> Child {
    let cfg = cfg.to_str().unwrap();
    command(&[
        "tune",
        "ppo",
        "--config",
        cfg,
        "--storage",
        url,
        "--study",
        study,
        "--trials",
        &trials.to_string(),
        "--heartbeat-grace",
        "8s",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("a tradebot worker starts")
}

/// The study as Python's Optuna reads it.
fn dump(port: u16, study: &str) -> Value {
    let o = Command::new(python()).arg(peer()).args(["dump", &port.to_string(), study]).output().unwrap();
    assert!(o.status.success(), "optuna_peer.py dump: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("dump is not JSON ({e}): {}", text(&o)))
}

/// The study as Python's Optuna reads it, once it exists.
fn dump_when_there(port: u16, study: &str) -> Option<Value> {
    let o = Command::new(python()).arg(peer()).args(["dump", &port.to_string(), study]).output().unwrap();
    if !o.status.success() {
        return None;
    }
    Some(serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("dump is not JSON ({e}): {}", text(&o))))
}

fn finished(c: Child, who: &str) -> String {
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{who} failed: {}", text(&o));
    text(&o)
}

/// PostgreSQL from Debian's package on a temporary data directory and a free loopback port (run as the
/// `postgres` user where the test runs as root, which PostgreSQL refuses).
struct Postgres {
    dir: PathBuf,
    port: u16,
}

const PGBIN: &str = "/usr/lib/postgresql/15/bin";

/// Whether the test runs as root (`/proc/self` belongs to the process's effective user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

impl Postgres {
    fn start(dir: &Path) -> Postgres {
        let data = dir.join("pg");
        std::fs::create_dir_all(&data).unwrap();
        let root = is_root();
        let pg = |tool: &str, args: &[&str]| {
            let bin = format!("{PGBIN}/{tool}");
            assert!(
                Path::new(&bin).exists(),
                "no {bin}: install Debian's postgresql package (apt-get install postgresql)"
            );
            let mut c = if root { Command::new("runuser") } else { Command::new(&bin) };
            if root {
                c.args(["-u", "postgres", "--", &bin]);
            }
            let o = c.args(args).output().unwrap();
            assert!(o.status.success(), "{tool} {args:?}: {}", text(&o));
        };
        if root {
            use std::os::unix::fs::PermissionsExt;
            // The test's temporary directory is the test user's alone: PostgreSQL's user must pass through it.
            if let Some(parent) = dir.parent() {
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            for d in [dir, data.as_path()] {
                let o = Command::new("chown").arg("postgres").arg(d).output().unwrap();
                assert!(o.status.success(), "{}", text(&o));
            }
        }
        let port = free_port();
        let d = data.to_str().unwrap();
        pg("initdb", &["-D", d, "-U", "optuna", "--auth=trust"]);
        let opts = format!("-p {port} -k {d} -c listen_addresses=127.0.0.1");
        pg("pg_ctl", &["-D", d, "-l", &format!("{d}/server.log"), "-w", "-o", &opts, "start"]);
        let pgport = port.to_string();
        pg("createdb", &["-h", "127.0.0.1", "-p", &pgport, "-U", "optuna", "optuna"]);
        let o = Command::new(python()).args(["-c", "import psycopg2"]).output().unwrap();
        assert!(o.status.success(), "the venv lacks psycopg2 (`make optuna`): {}", text(&o));
        Postgres { dir: data, port }
    }

    fn url(&self) -> String {
        format!("postgresql+psycopg2://optuna@127.0.0.1:{}/optuna", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let d = self.dir.to_str().unwrap();
        let bin = format!("{PGBIN}/pg_ctl");
        let _ = if is_root() {
            Command::new("runuser").args(["-u", "postgres", "--", &bin, "-D", d, "-m", "fast", "stop"]).output()
        } else {
            Command::new(&bin).args(["-D", d, "-m", "fast", "stop"]).output()
        };
    }
}

#[test]
fn two_tradebot_workers_and_a_python_worker_share_a_study_through_a_proxy_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut proxy = Proxy::sqlite(&dir.path().join("optuna.db"));
    shared_search(dir.path(), &mut proxy);
}

/// The same suite (the shared search through a restart, then a killed worker) over PostgreSQL.
#[test]
fn the_same_search_on_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::start(&dir.path().join("db"));
    let mut proxy = Proxy::start(&pg.url(), free_port());
    shared_search(dir.path(), &mut proxy);
    killed_worker(dir.path(), &proxy);
}

/// Two tradebot workers and a Python worker on one study through `proxy`, restarted mid-search.
fn shared_search(dir: &Path, proxy: &mut Proxy) {
    let url = proxy.url();
    let (a, b) = (config(&dir.join("a"), 576), config(&dir.join("b"), 576));
    // Enough trials that the tradebot workers are still searching when the Python worker's 3 have ended.
    let trials = 40;
    let (mut wa, mut wb) = (worker(&a, &url, "mixed", trials), worker(&b, &url, "mixed", trials));
    let py =
        Command::new(python()).arg(peer()).args(["worker", &proxy.port.to_string(), "mixed", "3"]).output().unwrap();
    assert!(py.status.success(), "the Python worker failed: {}", text(&py));
    // The proxy restarts while the tradebot workers search: both wait it out.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let study = dump_when_there(proxy.port, "mixed").unwrap_or_default();
        let ours = study["trials"]
            .as_array()
            .map_or(0, |t| t.iter().filter(|t| t["system_attrs"]["tradebot:worker"].is_string()).count());
        if ours >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the tradebot workers created no 2 trials in 300s: {study}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let running = |w: &mut Child| w.try_wait().unwrap().is_none();
    assert!(running(&mut wa) && running(&mut wb), "a tradebot worker ended before the proxy's restart: too few trials");
    proxy.restart();
    let (la, lb) = (finished(wa, "worker a"), finished(wb, "worker b"));
    let study = dump(proxy.port, "mixed");
    let all = study["trials"].as_array().unwrap();
    // Workers stop creating at the study's count; a race may add one trial per worker beyond it.
    assert!(all.len() >= trials && all.len() <= trials + 2, "{} trials: {study}", all.len());
    let mut numbers: Vec<u64> = all.iter().map(|t| t["number"].as_u64().unwrap()).collect();
    numbers.sort();
    assert_eq!(numbers, (0..all.len() as u64).collect::<Vec<_>>(), "trial numbers unique and dense");
    for t in all {
        let s = t["state"].as_str().unwrap();
        assert!(["COMPLETE", "PRUNED", "FAIL"].contains(&s), "trial {} ended {s}: {t}", t["number"]);
    }
    let ours: Vec<&Value> = all.iter().filter(|t| t["system_attrs"]["tradebot:worker"].is_string()).collect();
    let theirs = all.len() - ours.len();
    assert!(ours.len() >= 2 && theirs == 3, "{} tradebot trials, {theirs} Python ones", ours.len());
    // No trial made twice: every creation token once.
    let mut tokens: Vec<&str> = ours.iter().map(|t| t["system_attrs"]["tradebot:token"].as_str().unwrap()).collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), ours.len(), "a trial was created twice");
    // Python reads our parameters in their own form, with our ranges, and our values at the rungs.
    for t in &ours {
        if t["state"] == "FAIL" {
            continue;
        }
        let p = &t["params"];
        assert!([8.0, 16.0].contains(&p["n_steps"].as_f64().unwrap()), "{t}");
        let lr = p["learning_rate"].as_f64().unwrap();
        assert!((1e-4..=3e-3).contains(&lr), "{t}");
        assert!(t["distributions"]["learning_rate"].as_str().unwrap().contains("\"log\": true"), "{t}");
        assert!(!t["intermediate_values"].as_object().unwrap().is_empty(), "{t}");
        assert!(t["user_attrs"]["sharpe"].is_number(), "{t}");
        if t["state"] == "COMPLETE" {
            assert!(t["value"].is_number(), "{t}");
        }
    }
    // Each completed tradebot trial carries the gate's decision on the holdout (no champion on these fresh
    // machines), and the holdout's figures are the backtest's of the candidate registered from it.
    for t in ours.iter().filter(|t| t["state"] == "COMPLETE") {
        let gate = &t["user_attrs"]["gate"];
        assert!(gate["promote"].is_boolean() && gate["champion"].is_null(), "{t}");
        assert!(!gate["reason"].as_str().unwrap_or_default().is_empty(), "{t}");
    }
    // Each worker's best so far was registered as it completed and names its candidate; the study names
    // each worker's last (its best); each candidate's holdout figures are `tradebot backtest`'s.
    let models: Vec<(&Value, &str)> =
        ours.iter().filter_map(|t| Some((*t, t["user_attrs"]["model_id"].as_str()?))).collect();
    assert!(!models.is_empty(), "no worker registered a candidate: {study}");
    for (k, v) in study["system_attrs"].as_object().unwrap() {
        let Some(n) = k.strip_prefix("tradebot:model:").and_then(|n| n.parse::<u64>().ok()) else { continue };
        let t = all.iter().find(|t| t["number"].as_u64() == Some(n)).unwrap();
        assert_eq!(&t["user_attrs"]["model_id"], v, "{t}");
    }
    for (t, id) in models {
        let shown = [&a, &b].iter().find_map(|cfg| {
            let o = tradebot(&[
                "backtest",
                "--config",
                cfg.to_str().unwrap(),
                "--model",
                id,
                "--from",
                "2007-07-01",
                "--to",
                "2007-12-31",
                "--json",
            ]);
            o.status.success().then(|| serde_json::from_slice::<Value>(&o.stdout).unwrap())
        });
        let shown = shown.unwrap_or_else(|| panic!("candidate {id} backtests in neither worker's state"));
        assert_eq!(t["user_attrs"]["holdout_trades"], shown["strategy"]["trades"], "{t}\n{shown}");
        let (r, s) = (t["user_attrs"]["holdout_return"].as_f64().unwrap(), shown["strategy"]["total_return"].as_f64());
        assert!((r - s.unwrap()).abs() < 1e-9, "{t}\n{shown}");
    }
    // The best trial, by tradebot and by Optuna.
    let best = study["best"]["number"].as_u64().expect("a best trial");
    let o = tradebot(&["tune", "show", "mixed", "--config", a.to_str().unwrap(), "--storage", &url, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["best"].as_u64(), Some(best), "{shown}");
    assert_eq!(shown["trials"].as_array().unwrap().len(), all.len());
    let o = tradebot(&["tune", "list", "--config", a.to_str().unwrap(), "--storage", &url]);
    assert!(o.status.success() && text(&o).contains("mixed"), "{}", text(&o));
    // Each worker registered its best trial's model where it trained; one of them saw the proxy go away.
    assert!(la.contains("registered as candidate") || lb.contains("registered as candidate"), "{la}\n{lb}");
    assert!(format!("{la}{lb}").contains("answers again"), "no worker logged waiting out the restart:\n{la}\n{lb}");
}

#[test]
fn a_killed_workers_trial_is_failed_by_the_other_and_the_study_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::sqlite(&dir.path().join("optuna.db"));
    killed_worker(dir.path(), &proxy);
}

/// A worker killed mid-trial on `proxy`'s storage: its trial is failed by the other and the study finishes.
fn killed_worker(dir: &Path, proxy: &Proxy) {
    let url = proxy.url();
    // A long trial for the worker to be killed in; the other's trials end at their one rung (complete).
    let (a, b) = (config(&dir.join("killed-a"), 40_000), config(&dir.join("killed-b"), 64));
    let mut wa = worker(&a, &url, "killed", 4);
    let deadline = Instant::now() + Duration::from_secs(300);
    let victim = loop {
        let study = dump_when_there(proxy.port, "killed").unwrap_or_default();
        if let Some(t) = study["trials"].as_array().and_then(|t| t.iter().find(|t| t["state"] == "RUNNING")) {
            break t["number"].as_u64().unwrap();
        }
        assert!(Instant::now() < deadline, "worker a started no trial in 300s");
        std::thread::sleep(Duration::from_millis(200));
    };
    common::signal(wa.id(), nix::sys::signal::Signal::SIGKILL);
    let _ = wa.wait();
    let wb = worker(&b, &url, "killed", 4);
    let lb = finished(wb, "worker b");
    let study = dump(proxy.port, "killed");
    let all = study["trials"].as_array().unwrap();
    let t = all.iter().find(|t| t["number"].as_u64() == Some(victim)).unwrap();
    assert_eq!(t["state"], "FAIL", "{t}");
    assert!(t["user_attrs"]["error"].as_str().unwrap().contains("no heartbeat"), "{t}");
    assert!(all.iter().all(|t| t["state"] != "RUNNING"), "{study}");
    assert!(lb.contains(&format!("trial {victim} failed")), "{lb}");
}

#[test]
fn a_trial_whose_creation_answer_was_lost_is_found_by_its_token_not_made_twice() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:///{}", dir.path().join("optuna.db").display());
    let proxy = Proxy::run("lossy-proxy", &db, free_port());
    let cfg = config(&dir.path().join("a"), 64);
    let log = finished(worker(&cfg, &proxy.url(), "lossy", 3), "the worker");
    assert!(log.contains("was created before the storage went away: kept, not created again"), "{log}");
    let study = dump(proxy.port, "lossy");
    let all = study["trials"].as_array().unwrap();
    let numbers: Vec<u64> = all.iter().map(|t| t["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1, 2], "one trial per creation, the lost answer's included: {study}");
    assert!(all.iter().all(|t| ["COMPLETE", "PRUNED", "FAIL"].contains(&t["state"].as_str().unwrap())), "{study}");
}

#[test]
fn a_study_with_another_search_space_is_refused_naming_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::sqlite(&dir.path().join("optuna.db"));
    // A Python study whose learning_rate is a linear range.
    let script = "import sys, optuna\n\
        from optuna.storages import GrpcStorageProxy\n\
        s = optuna.create_study(study_name='other', direction='maximize', storage=GrpcStorageProxy(host='127.0.0.1', port=int(sys.argv[1])))\n\
        s.optimize(lambda t: t.suggest_float('learning_rate', 0.0, 1.0), n_trials=1)\n";
    let o = Command::new(python()).args(["-c", script, &proxy.port.to_string()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let a = config(&dir.path().join("a"), 576);
    let o = tradebot(&["tune", "ppo", "--config", a.to_str().unwrap(), "--storage", &proxy.url(), "--study", "other"]);
    assert!(!o.status.success(), "{}", text(&o));
    let why = text(&o);
    assert!(why.contains("learning_rate is log 0.0001..0.003 here but linear 0..1 in the study's trial 0"), "{why}");
    assert_eq!(dump(proxy.port, "other")["trials"].as_array().unwrap().len(), 1, "the refused worker added a trial");
}
