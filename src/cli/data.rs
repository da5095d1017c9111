//! `tradebot data import` (through the running daemon when one runs) and `tradebot data show`.

use super::control::ask_daemon;
use super::{DataCmd, EX_DATAERR, load_config};
use crate::control::server::LONG_ANSWER_TIMEOUT;
use crate::control::{ImportSummary, Request};
use crate::daemon::requests::{import_options, import_summary};
use crate::data::{daily_bar_time, import_file};
use crate::domain::{Symbol, Timeframe};
use crate::out::{err, errln, outln};
use crate::store::Store;
use anyhow::{Context, anyhow};
use chrono::{Duration, NaiveDate};
use std::process::ExitCode;

fn date(flag: &str, s: &str) -> anyhow::Result<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| anyhow!("{flag} {s:?} is not a date: write YYYY-MM-DD"))
}

pub(super) fn run(cmd: DataCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        DataCmd::Fetch(args) => super::fetch::run(args),
        DataCmd::Import { file, symbols, symbol, timeframe, date_format, config } => {
            let config = load_config(config)?;
            let opts = import_options(&symbols, symbol.as_deref(), &timeframe, date_format.clone())?;
            // A running daemon reads the file itself, from where this command was started.
            let path = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
            let req = Request::Import { file: path, symbols, symbol, timeframe, date_format };
            let (summary, by) = match ask_daemon(&config, &req, LONG_ANSWER_TIMEOUT)? {
                Some(r) => {
                    let s = r.import.ok_or_else(|| anyhow!("the running daemon did not say what it imported"))?;
                    (s, " (by the running daemon)")
                }
                None => {
                    let store = Store::open(&config.state_dir).context("opening the store")?;
                    let r = import_file(&store, &file, &opts)?;
                    store.flush()?;
                    (import_summary(&r, store.dir()), "")
                }
            };
            print_import(&file.display().to_string(), &summary, by)
        }
        DataCmd::Show { symbol, from, to, timeframe, json, config } => {
            let config = load_config(config)?;
            let sym = Symbol::new(&symbol).context("SYMBOL")?;
            let tf = Timeframe::parse(&timeframe).context("--timeframe")?;
            let (from, to) = (date("--from", &from)?, date("--to", &to)?);
            if from > to {
                return Err(anyhow!("--from {from} is after --to {to}"));
            }
            let store = super::read_store(&config)?;
            // Whole days in New York time: [from 00:00, to+1 00:00).
            let next = to
                .checked_add_days(chrono::Days::new(1))
                .ok_or_else(|| anyhow!("--to {to} is too far in the future"))?;
            let hi = daily_bar_time(next) - Duration::microseconds(1);
            let bars = store.bars(&sym, tf, daily_bar_time(from), hi)?;
            if json {
                for b in &bars {
                    let v =
                        serde_json::json!({"t": b.t.to_rfc3339(), "o": b.o, "h": b.h, "l": b.l, "c": b.c, "v": b.v});
                    outln!("{v}")?;
                }
            } else {
                outln!("{:<25} {:>12} {:>12} {:>12} {:>12} {:>14}", "t", "open", "high", "low", "close", "volume")?;
                for b in &bars {
                    outln!(
                        "{:<25} {:>12.4} {:>12.4} {:>12.4} {:>12.4} {:>14.0}",
                        b.t.to_rfc3339(),
                        b.o,
                        b.h,
                        b.l,
                        b.c,
                        b.v
                    )?;
                }
            }
            if bars.is_empty() {
                errln!("no {tf} bars of {sym} between {from} and {to} in {}", store.dir().display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// What an import read and stored (`by`: who imported, when not this command), and its bad rows:
/// exit `EX_DATAERR` when there are any.
fn print_import(file: &str, r: &ImportSummary, by: &str) -> anyhow::Result<ExitCode> {
    outln!("read {file} as {}", r.format)?;
    for (sym, n) in &r.rows {
        outln!("{sym}: {n} bars")?;
    }
    outln!("{} new bars stored in {}{by}", r.new_bars, r.store)?;
    if r.filtered > 0 {
        outln!("{} rows of other symbols skipped (--symbols)", r.filtered)?;
    }
    if r.empty > 0 {
        outln!("{} rows without prices (null) skipped", r.empty)?;
    }
    if r.bad.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    err!("{}", bad_rows(file, r));
    Ok(ExitCode::from(EX_DATAERR))
}

/// Shown bad rows before the rest are summed up.
const BAD_ROWS_SHOWN: usize = 10;

/// The bad rows of an import: the first ten with their lines, how many more, and what was stored.
fn bad_rows(file: &str, r: &ImportSummary) -> String {
    let mut o = String::new();
    for (line, reason) in r.bad.iter().take(BAD_ROWS_SHOWN) {
        o.push_str(&format!("{file}:{line}: {reason}\n"));
    }
    if r.bad.len() > BAD_ROWS_SHOWN {
        o.push_str(&format!("{file}: ... and {} more bad rows\n", r.bad.len() - BAD_ROWS_SHOWN));
    }
    if r.stopped {
        o.push_str(&format!(
            "{file}: stopped: the first {} rows all failed; check the layout (see `tradebot data import --help`) or \
             name the date format with --date-format (e.g. %d.%m.%Y)\n",
            r.bad.len()
        ));
    }
    let good: usize = r.rows.values().sum();
    let stored = match good {
        0 => "no row was imported: check the layout and date format (see `tradebot data import --help`)".to_string(),
        n => format!("the {n} good rows were imported"),
    };
    o.push_str(&format!("{file}: {} bad rows not imported; {stored}\n", r.bad.len()));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_bad_rows_are_summed_up_and_say_what_was_stored() {
        let bad = (0..25).map(|i| (i + 2, "date \"x\" is none of".to_string())).collect();
        let r = ImportSummary { bad, ..Default::default() };
        let text = bad_rows("f.csv", &r);
        assert_eq!(text.lines().count(), 12, "{text}");
        assert!(text.contains("f.csv:2: ") && text.contains("... and 15 more bad rows"), "{text}");
        assert!(text.contains("no row was imported"), "{text}");
        let r =
            ImportSummary { rows: [("AAPL".to_string(), 7)].into(), bad: r.bad[..1].to_vec(), ..Default::default() };
        assert!(bad_rows("f.csv", &r).contains("1 bad rows not imported; the 7 good rows were imported"));
    }
}
