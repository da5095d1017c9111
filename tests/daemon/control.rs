//! The control socket beside a running daemon: it answers with 1,100 idle dashboard connections held, and
//! the commands that read the store answer as with the daemon stopped while `promote` goes through it.

use super::common::{self, command, text, tradebot};
use super::{config_in, free_port};
use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One request over the control socket at `sock`, answered within 10 s, or why not.
fn control_status(sock: &Path) -> Result<serde_json::Value, String> {
    use std::io::BufRead;
    let mut s = std::os::unix::net::UnixStream::connect(sock).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    s.write_all(b"{\"cmd\":\"status\"}\n").map_err(|e| format!("write: {e}"))?;
    let mut line = String::new();
    std::io::BufReader::new(&s).read_line(&mut line).map_err(|e| format!("no answer: {e}"))?;
    serde_json::from_str(&line).map_err(|e| format!("{e}: {line:?}"))
}

#[test]
fn eleven_hundred_idle_dashboard_connections_leave_the_control_socket_and_the_dashboard_working() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    const IDLE: usize = 1_100;
    // The test holds the idle connections itself: its own soft limit goes up to its hard one.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= 2 * IDLE as u64,
        "this test opens {IDLE} connections: it needs `ulimit -Hn` of 2200 or more, not {hard}"
    );
    if soft < hard.min(1 << 20) {
        setrlimit(Resource::RLIMIT_NOFILE, hard.min(1 << 20), hard).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let no_retrain = (
        "(so a replay retrains in simulated time).\nenabled = true",
        "(so a replay retrains in simulated time).\nenabled = false",
    );
    let cfg = config_in(dir.path(), Some(port), &[no_retrain]);
    let token = "test-token-0123456789abcdef";
    let log_path = dir.path().join("run.log");
    // At most 1024 open files for the daemon (a common hard limit; 1,100 connections held would leave none
    // for the control socket and the store), starting from a soft limit of 256 that it raises at start.
    let args = ["run", "--config", cfg.to_str().unwrap(), "--linger"];
    let mut child = common::Reaped(
        common::command_with_open_files((256, 1024), &args)
            .env("TRADEBOT_WEB_TOKEN", token)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let sock = dir.path().join("state/control.sock");
    let deadline = Instant::now() + Duration::from_secs(120);
    while control_status(&sock).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited:\n{}", log_text());
        assert!(Instant::now() < deadline, "the control socket never answered:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(200));
    }

    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let idle: Vec<std::net::TcpStream> = (0..IDLE)
        .map(|i| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let st = control_status(&sock).unwrap_or_else(|e| panic!("the control socket is starved: {e}\n{}", log_text()));
    assert_eq!(st["ok"], true, "{st}");
    assert!(st["status"]["mode"].is_string(), "{st}");
    // The served ones are closed when their request head does not come (web.header_timeout_secs = 10).
    let mut first = idle[0].try_clone().unwrap();
    first.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    match first.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("an idle connection was not closed within 20 s: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(15), "closed after {:?}", started.elapsed());
    drop(first);
    drop(idle);

    // With the idle ones gone, a real request is answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (code, body) = loop {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        let code: u16 = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        if code == 200 || Instant::now() > deadline {
            break (code, raw);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, 200, "{body}\n{}", log_text());
    assert!(body.contains("\"mode\""), "{body}");
    let log = log_text();
    assert!(log.contains("open files: limit raised from 256 to 1024 (the hard limit)"), "{log}");
    assert!(log.contains("connections are open (web.max_connections): closed"), "no refusal logged:\n{log}");
    assert!(child.try_wait().unwrap().is_none(), "the daemon exited:\n{log}");
    common::signal(child.id(), Signal::SIGTERM);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", log_text());
}

/// Issue 37: the commands that read the store answer beside a running daemon (here a lingering replay)
/// exactly as they answer with it stopped: the daemon gives each a read snapshot of its store (`report`
/// one of its account store, equal to the fills stored). `train` and `tune` work on such a snapshot;
/// `models promote`, `risk clear` and `data import` go through the daemon, which applies them.
#[test]
fn read_commands_beside_a_running_daemon_answer_as_with_it_stopped_and_promote_goes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let no_retrain = (
        "# Weekend retraining, driven by the engine's clock (so a replay retrains in simulated time).\nenabled = true",
        "enabled = false",
    );
    // A 2% daily loss limit, which the demo replay trips on 2012-12-05 (2.21% down from the previous
    // close), so that `risk clear` below has something to clear.
    let limit = ("daily_loss_limit_pct = 0.05", "daily_loss_limit_pct = 0.02");
    let cfg = config_in(dir.path(), None, &[no_retrain, limit]);
    // A small search space, for the `tune ppo` below (the replay does not use it).
    let space = "\n[tune.space]\nn_steps = { kind = \"choice\", values = [16, 32] }\n\
                 batch_size = { kind = \"choice\", values = [256, 512] }\nn_epochs = { kind = \"int\", low = 1, high = 2 }\n\
                 width = { kind = \"choice\", values = [16, 32] }\n";
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap() + space).unwrap();
    let c = cfg.to_str().unwrap();
    let log_path = dir.path().join("run.log");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut child = common::Reaped(
        command(&["run", "--config", c, "--linger"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let sock = dir.path().join("state/control.sock");
    let deadline = Instant::now() + Duration::from_secs(240);
    while !control_status(&sock).is_ok_and(|v| v["status"]["activity"] == "replay finished") {
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited early:\n{}", log_text());
        assert!(Instant::now() < deadline, "the replay did not finish in time:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(300));
    }
    // A search runs on the daemon's snapshot of the bars too (its study is not stored: the daemon holds
    // the store); its candidate is registered before the reads below.
    let o = tradebot(&["tune", "ppo", "--config", c, "--trials", "2", "--parallel", "2", "--budget-steps", "256"]);
    assert!(o.status.success(), "tune beside the daemon:\n{}", text(&o));
    assert!(text(&o).contains("the study will not be stored"), "{}", text(&o));
    let reads: [&[&str]; 6] = [
        &["data", "show", "AAPL", "--from", "2012-03-01", "--to", "2012-03-09"],
        &["risk", "status"],
        &["tune", "list"],
        &["models", "list", "--json"],
        &["backtest", "--from", "2012-01-03", "--to", "2012-03-30", "--json"],
        &["report", "--json"],
    ];
    let run_all = || -> Vec<String> {
        reads
            .iter()
            .map(|args| {
                let o = tradebot(&[*args, &["--config", c][..]].concat());
                assert!(o.status.success(), "{args:?}:\n{}", text(&o));
                String::from_utf8_lossy(&o.stdout).to_string()
            })
            .collect()
    };
    let beside = run_all();
    // The account's report as a tear sheet and its fills as CSV, beside the daemon: the page embeds the
    // JSON `report --json` prints.
    let (sheet, csv) = (dir.path().join("account.html"), dir.path().join("fills.csv"));
    let args = ["report", "--config", c, "--json"];
    let files = ["--report", sheet.to_str().unwrap(), "--trades", csv.to_str().unwrap()];
    let o = tradebot(&[&args[..], &files[..]].concat());
    assert!(o.status.success(), "report beside the daemon:\n{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let page = std::fs::read_to_string(&sheet).unwrap();
    let open = r#"<script type="application/json" id="report">"#;
    let at = page.find(open).unwrap() + open.len();
    let embedded: serde_json::Value =
        serde_json::from_str(&page[at..at + page[at..].find("</script>").unwrap()]).unwrap();
    assert_eq!(embedded, report, "the tear sheet's numbers are the JSON's");
    let day = |k: &str| report[k].as_str().unwrap()[..10].to_string();
    let heading = format!("<h1>The replay account, {} to {}</h1>", day("from"), day("to"));
    assert!(page.contains(&heading), "{heading} in {}", &page[..page.len().min(900)]);
    let csv_rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(csv_rows as u64, report["fills"].as_u64().unwrap(), "a CSV row for each fill");
    assert!(report["fills"].as_u64().unwrap() > 0 && report["bars"].as_u64().unwrap() > 100, "{report}");
    // State changes go through the daemon too: the kill switch (tripped in December 2012, above),
    // cleared by the engine itself (a second clear finds nothing), and an import.
    let o = tradebot(&["risk", "clear", "--config", c]);
    assert!(o.status.success() && text(&o).contains("kill switch cleared by "), "{}", text(&o));
    assert!(
        text(&o).contains("(it tripped at 2012-12-05") && text(&o).contains("(by the running daemon)"),
        "{}",
        text(&o)
    );
    let o = tradebot(&["risk", "clear", "--config", c]);
    assert!(o.status.success() && text(&o).contains("was not tripped; nothing to clear"), "{}", text(&o));
    let bars = dir.path().join("aapl-2030.csv");
    std::fs::write(
        &bars,
        "Date,Open,High,Low,Close,Volume\n2030-01-02,10,11,9,10.5,1000\n2030-01-03,10.5,12,10,11.5,2000\n",
    )
    .unwrap();
    let o = tradebot(&["data", "import", bars.to_str().unwrap(), "--symbol", "AAPL", "--config", c]);
    assert!(o.status.success() && text(&o).contains("2 new bars stored in"), "{}", text(&o));
    assert!(text(&o).contains("(by the running daemon)"), "{}", text(&o));
    let o = tradebot(&["data", "show", "AAPL", "--from", "2030-01-01", "--to", "2030-01-31", "--json", "--config", c]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2, "the imported bars, read beside:\n{}", text(&o));
    let log = log_text();
    assert!(log.contains("audit: control socket risk clear: kill switch cleared by "), "{log}");
    assert!(log.contains("risk: kill switch cleared by "), "the engine cleared it:\n{log}");
    assert!(log.contains("audit: control socket data import: 2 new bars"), "{log}");
    // Training reads the bars from a snapshot too, and registers its candidate beside the daemon.
    let o = tradebot(&["train", "ppo", "--config", c, "--device", "cpu", "--steps", "256", "--json"]);
    assert!(o.status.success(), "train beside the daemon:\n{}", text(&o));
    let done: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    let trained = done["model_id"].as_str().unwrap().to_string();
    // The champion changes through the daemon, which trades with it from the next bar.
    let o = tradebot(&["models", "promote", &trained, "--config", c]);
    assert!(o.status.success() && text(&o).contains("(by the running daemon)"), "{}", text(&o));
    let st = control_status(&sock).unwrap();
    assert_eq!(st["status"]["models"]["ppo"], trained.as_str(), "{st}");
    assert!(log_text().contains(&format!("models: {trained} promoted to ppo champion by hand")), "{}", log_text());
    // And back, through the daemon too, so that the backtest below runs the same champion.
    let o = tradebot(&["models", "rollback", "ppo", "--config", c]);
    assert!(o.status.success() && text(&o).contains("(by the running daemon)"), "{}", text(&o));
    let st = control_status(&sock).unwrap();
    assert_ne!(st["status"]["models"]["ppo"], trained.as_str(), "{st}");
    for snapshots in ["state/snapshots", "state/replay/snapshots"] {
        let left = std::fs::read_dir(dir.path().join(snapshots)).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "every reader removed its snapshot ({snapshots})");
    }

    common::signal(child.id(), Signal::SIGTERM);
    assert!(child.wait().unwrap().success(), "{}", log_text());
    // The report is the account's fills as stored: their count, notional and fees (at the demo's 10 bps).
    let account = tradebot::store::Store::open_read_only(&dir.path().join("state/replay")).unwrap();
    let fills = account.tree::<tradebot::oms::FillRecord>(tradebot::store::TreeName::Fills).unwrap();
    let fills: Vec<_> = fills.scan_prefix(b"").unwrap().into_iter().map(|(_, f)| f).collect();
    let notional: f64 = fills.iter().map(|f| (f.qty * f.price).to_string().parse::<f64>().unwrap()).sum();
    assert_eq!(report["fills"].as_u64(), Some(fills.len() as u64), "{report}");
    assert!((report["notional"].as_f64().unwrap() - notional).abs() < 1e-6 * notional, "{report} vs {notional}");
    assert!((report["fees"].as_f64().unwrap() - notional * 10.0 / 10_000.0).abs() < 1e-6 * notional, "{report}");
    drop(account);
    let stopped = run_all();
    for ((args, a), b) in reads.iter().zip(&beside).zip(&stopped) {
        // models list differs only by the model trained and promoted in between.
        if args[0] == "models" {
            let (a, b): (serde_json::Value, serde_json::Value) =
                (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
            assert_eq!(a.as_array().unwrap().len() + 1, b.as_array().unwrap().len(), "{a}\n{b}");
            continue;
        }
        assert_eq!(a, b, "{args:?}: beside the daemon and with it stopped");
    }
}
