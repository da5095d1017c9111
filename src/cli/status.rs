//! `tradebot status --config F [--json]`: the running daemon's `StatusReport` over the control socket, as a
//! table or JSON. With no daemon, what the state directory says (champions, last retrain and its gate
//! decision, stored positions, the kill switch), marked "daemon not running".

use super::load_config;
use crate::control::{Request, StatusReport, client, socket_path};
use crate::out::out;
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `writeln!` into the table's `String` (which cannot fail).
macro_rules! w {
    ($o:expr, $($t:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($t)*);
    }};
}

pub(super) fn run(config: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let config = load_config(config)?;
    // A missing state directory: no daemon runs there and there is nothing to read (said, not created).
    super::existing_state_dir(&config)?;
    let socket = socket_path(&config.state_dir);
    let report = match client::request(&socket, &Request::Status, Duration::from_secs(10)) {
        Ok(r) => match (r.ok, r.status) {
            (true, Some(s)) => *s,
            _ => bail!("the daemon on {} did not give its status: {}", socket.display(), r.error.unwrap_or_default()),
        },
        Err(client::ClientError::NotRunning(_)) => {
            // Read-only: a private copy of the database, checked as `run` and `store check` check it.
            let store = super::read_store(&config)?;
            crate::daemon::status::offline::from_store(&config, &store, crate::clock::now())
                .context("reading the state directory")?
        }
        Err(e) => return Err(e).context("asking the daemon for its status"),
    };
    let text = if json { serde_json::to_string_pretty(&report)? + "\n" } else { report_table(&report) };
    // A closed pipe (`status | head -1`) is an `OutError`, which `main` ends quietly; never a panic.
    out!("{text}")?;
    Ok(ExitCode::SUCCESS)
}

/// The status as a table.
fn report_table(s: &StatusReport) -> String {
    let mut o = String::new();
    if s.daemon_running {
        let since = s.started_at.map(|t| format!(" since {t}")).unwrap_or_default();
        w!(o, "daemon:      running (pid {}{since}), {} mode: {}", s.pid, s.mode, s.activity);
    } else {
        w!(o, "daemon:      not running ({} mode in the config); figures below are from the state directory", s.mode);
        if let Some(i) = s.activity.find(crate::control::report::NO_MODEL) {
            w!(o, "             {}", &s.activity[i..]);
        }
        match s.as_of {
            Some(t) => w!(o, "             equity, cash and prices as of {t}, the daemon's last status"),
            None => w!(o, "             (no status was ever published here: no equity, cash or prices)"),
        }
    }
    let f = &s.feed;
    let conn = if !s.daemon_running {
        "-"
    } else if f.connected {
        "connected"
    } else {
        "DISCONNECTED"
    };
    w!(o, "feed:        {} {conn}, {} bars, {} reconnects", f.kind, f.bars_received, f.reconnects);
    for (sym, t) in &f.last_bar {
        w!(o, "  last bar   {sym:<8} {t}");
    }
    for x in &f.stale {
        let state = if x.down { "DOWN" } else { "stale" };
        w!(o, "  {state:<10} {:<8} no bar for {} period(s); last close carried, not traded", x.symbol, x.bars);
    }
    if s.equity.is_finite() {
        w!(o, "equity:      {:.2} (cash {:.2}, today {:+.2})", s.equity, s.cash, s.pnl_today);
    }
    w!(o, "positions:   {}", if s.positions.is_empty() { "none" } else { "" });
    for p in &s.positions {
        if p.price.is_finite() {
            w!(o, "  {:<8} {:>12.4} @ {:>10.2} = {:>12.2}", p.symbol, p.qty, p.price, p.value);
        } else {
            w!(o, "  {:<8} {:>12.4} (no price known)", p.symbol, p.qty);
        }
    }
    w!(o, "open orders: {}", s.open_orders.len());
    for ord in &s.open_orders {
        w!(o, "  {} {} {} {} {}", ord.client_order_id, ord.symbol, ord.side, ord.qty, ord.status);
    }
    let m = &s.models;
    w!(o, "models:      ppo {}, lstm {}", m.ppo.as_deref().unwrap_or("none"), m.lstm.as_deref().unwrap_or("none"));
    if let Some(k) = &m.retraining {
        w!(o, "  retraining {k} now");
    }
    match &m.last_retrain {
        Some(r) => {
            let at = r.started_at.map(|t| t.to_string()).unwrap_or_default();
            let cand = r.candidate.as_deref().map(|c| format!(" (candidate {c})")).unwrap_or_default();
            // A run under way has no reason yet: no dangling colon.
            let why = if r.reason.is_empty() { String::new() } else { format!(": {}", r.reason) };
            w!(o, "  last retrain {at}: {}{cand}{why}", r.outcome);
            if let (Some(from), Some(to)) = (r.data_from, r.data_to) {
                w!(o, "    trained on bars from {from} to {to}");
            }
        }
        None => w!(o, "  last retrain: never"),
    }
    if let Some(t) = m.next_retrain {
        w!(o, "  next retrain {t}");
    }
    let r = &s.risk;
    match (&r.kill_switch, &r.kill_reason) {
        (true, reason) => w!(o, "risk:        KILL SWITCH TRIPPED: {}", reason.as_deref().unwrap_or("")),
        (false, _) => w!(o, "risk:        kill switch clear{}", if r.paused { ", trading paused" } else { "" }),
    }
    o
}
