//! `tradebot run` end to end with the real binary, one file per topic: the demo replay with its scheduled
//! retrains, the promotion gate and the hot swap (`replay`); the daemon kept running (`--linger`) under a
//! systemd-style notify socket, scraped on `/metrics`, its dashboard loaded in headless Chromium and
//! compared with `tradebot status --json`, and stopped with SIGTERM (`dashboard`); the live path against
//! the in-process fake Alpaca and the models a daemon starts with (`live`); the control socket beside a
//! running daemon (`control`). The helpers they share are here.

#[path = "../common/mod.rs"]
mod common;
mod control;
mod dashboard;
mod live;
mod replay;

use common::{demo_config, root, write_config};

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The demo config with its state under `dir`, the web server on `web` (or off), and `edits` applied
/// (each `(from, to)` must match once).
fn config_in(dir: &Path, web: Option<u16>, edits: &[(&str, &str)]) -> PathBuf {
    let mut t = demo_config(dir);
    let web_line = "enabled = true\nlisten = \"127.0.0.1:9187\"";
    assert!(t.contains(web_line));
    t = match web {
        Some(port) => t.replace(web_line, &format!("enabled = true\nlisten = \"127.0.0.1:{port}\"")),
        None => t.replace(web_line, "enabled = false\nlisten = \"127.0.0.1:9187\""),
    };
    for (a, b) in edits {
        assert_eq!(t.matches(a).count(), 1, "{a:?} in the demo config");
        t = t.replace(a, b);
    }
    write_config(dir, &t)
}

/// The demo's schedule crosses two retrains (2012-03-01 and 2012-07-01); tests about one retrain keep
/// only the second.
const ONE_RETRAIN: (&str, &str) = ("schedule = \"0 2 1 3,7 *\"", "schedule = \"0 2 1 7 *\"  ");

/// The demo's PPO retrain is a search (`retrain.tune`); tests about one PPO run's retrain (its hot swap, its
/// child's failure, its curves on the dashboard) train one warm-started PPO candidate instead.
const NO_SEARCH: (&str, &str) = ("\ntune = true ", "\ntune = false ");

fn final_ppo(out: &str) -> String {
    let line = out.lines().find(|l| l.starts_with("models at the end: ppo ")).unwrap_or_else(|| panic!("{out}"));
    line["models at the end: ppo ".len()..].split(',').next().unwrap().to_string()
}

/// The shipped PPO model's id: the one `ppo-*` directory under `models/`.
fn shipped_ppo() -> String {
    let ids: Vec<String> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("ppo-"))
        .collect();
    assert_eq!(ids.len(), 1, "one shipped PPO model: {ids:?}");
    ids[0].clone()
}

/// The demo's replay window (`[feed] from`, `to`) and the trading days it holds in the shipped data:
/// AAPL's rows in that window, counted from the CSV. Every replay of the demo must report that many bars.
const DEMO_WINDOW: (&str, &str) = ("2011-09-01", "2013-03-01");
fn demo_replay_days() -> usize {
    let gz = std::fs::File::open(root().join("data/stocks-daily-2000-2013.csv.gz")).unwrap();
    let mut rdr = csv::Reader::from_reader(flate2::read::GzDecoder::new(gz));
    let (from, to) = DEMO_WINDOW;
    rdr.records().map(|r| r.unwrap()).filter(|r| &r[0] == "AAPL" && &r[1] >= from && &r[1] <= to).count()
}

fn replay_finished() -> String {
    format!("replay finished: {} bars, {} to {}", demo_replay_days(), DEMO_WINDOW.0, DEMO_WINDOW.1)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain HTTP/1.1 GET; returns (status code, body).
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}
