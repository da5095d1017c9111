//! `tradebot run`: the daemon. This version checks the live/paper gate, opens the store, imports the
//! replay file when the store lacks its bars, and replays the configured window, printing a summary
//! (buy-and-hold per symbol). With the Alpaca feed and broker it hands over to the live runner (`cli::live`). The engine, brokers and scheduler plug in here as they land.

use crate::config::{BrokerKind, Config, ConfigError, FeedKind, Mode};
use crate::data::{ImportOptions, daily_bar_time, import_csv};
use crate::store::Store;
use anyhow::{Context, bail};
use chrono::{Duration, NaiveDate};
use std::process::ExitCode;

const FIRST_DAY: NaiveDate = NaiveDate::from_ymd_opt(1800, 1, 1).expect("a valid date");
const LAST_DAY: NaiveDate = NaiveDate::from_ymd_opt(2300, 1, 1).expect("a valid date");

/// The live gate: both the config and the command line must say live, or neither.
pub fn check_live_gate(config: &Config, live_flag: bool) -> Result<(), ConfigError> {
    let problem = match (config.mode, live_flag) {
        (Mode::Live, false) => {
            "mode = \"live\" trades real money: add --live to the command line to confirm, or set mode = \"paper\""
        }
        (Mode::Paper, true) => {
            "--live was given but mode = \"paper\": set mode = \"live\" (see config/alpaca-live.toml.example) or drop --live"
        }
        _ => return Ok(()),
    };
    Err(ConfigError { file: config.source.clone(), problems: vec![problem.to_string()] })
}

pub fn run(config: Config, live: bool) -> anyhow::Result<ExitCode> {
    check_live_gate(&config, live)?;
    if config.feed.kind == FeedKind::Alpaca && config.broker.kind == BrokerKind::Alpaca {
        return super::live::run(&config);
    }
    if config.feed.kind == FeedKind::Alpaca || config.broker.kind == BrokerKind::Alpaca {
        bail!(
            "{}: feed.kind and broker.kind must both be \"alpaca\" (the live runner) or both \"replay\"/\"sim\" in this version",
            config.source.display()
        );
    }
    let store = Store::open(&config.state_dir).context("opening the store")?;
    ensure_bars(&config, &store)?;
    let tf = config.market.timeframe;
    // An open end means all stored bars; bounded so that time arithmetic cannot overflow.
    let from = daily_bar_time(config.feed.from.unwrap_or(FIRST_DAY));
    let to = daily_bar_time(config.feed.to.unwrap_or(LAST_DAY)) + Duration::days(1) - Duration::microseconds(1);
    println!("tradebot {} — {:?} mode, replay of {tf} bars", env!("CARGO_PKG_VERSION"), config.mode);
    println!("{:<8} {:>6} {:>12} {:>12} {:>14} {:>10}", "symbol", "bars", "first", "last", "buy&hold", "max DD");
    for sym in &config.market.symbols {
        let bars = store.bars(sym, tf, from, to)?;
        let (Some(first), Some(last)) = (bars.first(), bars.last()) else {
            println!("{sym:<8} {:>6}", 0);
            continue;
        };
        let (mut peak, mut dd) = (f64::MIN, 0.0f64);
        for b in &bars {
            peak = peak.max(b.c);
            dd = dd.max(1.0 - b.c / peak);
        }
        println!(
            "{:<8} {:>6} {:>12} {:>12} {:>13.1}% {:>9.1}%",
            sym.as_str(),
            bars.len(),
            first.t.date_naive(),
            last.t.date_naive(),
            (last.c / first.c - 1.0) * 100.0,
            dd * 100.0
        );
    }
    store.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Imports `feed.file` into the store for every configured symbol that has no bars yet (one seek per
/// symbol). Used by `run`, `train` and `backtest`, so that each works on a fresh state directory.
pub fn ensure_bars(config: &Config, store: &Store) -> anyhow::Result<()> {
    let tf = config.market.timeframe;
    // One seek per symbol: is there any bar at all? A store error stops the run rather than passing for "none".
    let mut missing = Vec::new();
    for s in &config.market.symbols {
        if store.last_bar_time(s, tf)?.is_none() {
            missing.push(s.clone());
        }
    }
    if !missing.is_empty() {
        let Some(file) = &config.feed.file else {
            bail!(
                "the store has no {tf} bars for {missing:?} and feed.file is not set: run `tradebot data import FILE` first"
            );
        };
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        log::info!("importing {} for {}", file.display(), names.join(", "));
        let r = import_csv(store, file, &ImportOptions { symbols: missing.clone(), symbol: None, timeframe: tf })?;
        if !r.bad.is_empty() {
            bail!(
                "{}: {} bad rows (first: line {}: {}); fix the file or import it with `tradebot data import`",
                file.display(),
                r.bad.len(),
                r.bad[0].line,
                r.bad[0].reason
            );
        }
    }
    Ok(())
}
