//! Bars as JSON lines: one object per line with Alpaca's bar keys, `{"t": RFC 3339, "o", "h", "l", "c",
//! "v"}` and optionally `"S"` (the symbol, as Alpaca's stream sends it), `"n"` (trades) and `"vw"` (the
//! volume-weighted price), which are read and ignored. This is `tradebot data show --json`'s output and
//! what Alpaca's bars endpoint holds per symbol. Without `"S"` the file's symbol comes from `--symbol`. A key
//! outside these, a missing price or a bad line is a bad row with its line number, as in a CSV.

use super::{BadRow, FIRST_ROWS_ALL_BAD, ImportError, ImportOptions, ImportReport, RowError};
use crate::domain::{Bar, Symbol};
use crate::store::Store;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;

/// What `data import` says it read.
pub(crate) const FORMAT: &str = "JSON lines of Alpaca bars (t, o, h, l, c, v)";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    t: DateTime<Utc>,
    o: f64,
    h: f64,
    l: f64,
    c: f64,
    v: f64,
    #[serde(rename = "S")]
    symbol: Option<String>,
    #[serde(rename = "n")]
    _trades: Option<f64>,
    #[serde(rename = "vw")]
    _vwap: Option<f64>,
}

/// Imports the JSON lines of `reader` (the file `file`); good lines are stored, bad ones reported.
pub(crate) fn import(
    store: &Store,
    reader: impl BufRead,
    file: &str,
    opts: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    let wanted: HashSet<&Symbol> = opts.symbols.iter().collect();
    let mut report = ImportReport { format: FORMAT, ..Default::default() };
    let mut seen: HashMap<(Symbol, DateTime<Utc>), u64> = HashMap::new();
    let mut batch = Vec::new();
    for (i, text) in reader.lines().enumerate() {
        let line = i as u64 + 1;
        if report.bad.len() >= FIRST_ROWS_ALL_BAD && report.rows.is_empty() && report.filtered == 0 {
            report.stopped = true;
            break;
        }
        let text = text.map_err(|source| ImportError::Io { file: file.to_string(), source })?;
        if text.trim().is_empty() {
            continue;
        }
        let bar = match parse(&text, opts) {
            Ok(b) => b,
            Err(reason) => {
                report.bad.push(BadRow { line, reason: reason.to_string() });
                continue;
            }
        };
        if !wanted.is_empty() && !wanted.contains(&bar.symbol) {
            report.filtered += 1;
            continue;
        }
        if let Some(first) = seen.insert((bar.symbol.clone(), bar.t), line) {
            report.bad.push(BadRow { line, reason: format!("{} {} repeats line {first}", bar.symbol, bar.t) });
            continue;
        }
        *report.rows.entry(bar.symbol.to_string()).or_default() += 1;
        batch.push(bar);
    }
    report.new_bars += store.put_bars(&batch)?;
    Ok(report)
}

fn parse(text: &str, opts: &ImportOptions) -> Result<Bar, RowError> {
    let l: Line = serde_json::from_str(text).map_err(|e| RowError::NotABar(e.to_string()))?;
    let symbol = match (&l.symbol, &opts.symbol) {
        (_, Some(s)) => s.clone(),
        (Some(s), None) => Symbol::new(s)?,
        (None, None) => return Err(RowError::NoSymbolInLine),
    };
    Ok(Bar::new(symbol, opts.timeframe, l.t, l.o, l.h, l.l, l.c, l.v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, symbol: Option<&str>) -> (ImportReport, Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let opts = ImportOptions { symbol: symbol.map(|s| Symbol::new(s).unwrap()), ..Default::default() };
        let r = import(&store, text.as_bytes(), "bars.jsonl", &opts).unwrap();
        (r, store, dir)
    }

    #[test]
    fn alpaca_bars_import_with_their_symbol_or_the_named_one() {
        let text = concat!(
            r#"{"t":"2024-01-02T05:00:00Z","o":187.15,"h":188.44,"l":183.89,"c":185.64,"v":82488700,"n":1009074,"vw":185.9,"S":"AAPL"}"#,
            "\n\n",
            r#"{"t":"2024-01-03T05:00:00Z","o":184.22,"h":185.88,"l":183.43,"c":184.25,"v":58414460,"S":"AAPL"}"#,
            "\n"
        );
        let (r, store, _d) = run(text, None);
        assert_eq!((r.rows.get("AAPL"), r.new_bars, r.bad.len(), r.format), (Some(&2), 2, 0, FORMAT));
        let aapl = Symbol::new("AAPL").unwrap();
        let bars = store.bars(&aapl, crate::domain::Timeframe::DAY1, DateTime::<Utc>::MIN_UTC, Utc::now()).unwrap();
        assert_eq!(bars.len(), 2);
        assert_eq!((bars[1].o, bars[1].c, bars[1].v), (184.22, 184.25, 58414460.0));
        // `data show --json`'s own lines carry no symbol: --symbol names it.
        let (r, _, _d) = run(r#"{"t":"2024-01-02T05:00:00Z","o":1.0,"h":2.0,"l":0.5,"c":1.5,"v":10.0}"#, None);
        assert!(r.bad[0].reason.contains("--symbol"), "{:?}", r.bad);
        let (r, _, _d) = run(r#"{"t":"2024-01-02T05:00:00Z","o":1.0,"h":2.0,"l":0.5,"c":1.5,"v":10.0}"#, Some("IBM"));
        assert_eq!(r.rows.get("IBM"), Some(&1));
    }

    #[test]
    fn bad_lines_are_named_by_their_line_and_the_good_ones_stored() {
        let text = [
            r#"{"t":"2024-01-02T05:00:00Z","o":1.0,"h":2.0,"l":0.5,"c":1.5,"v":10.0,"S":"X"}"#,
            r#"{"t":"2024-01-03T05:00:00Z","o":1.0,"h":2.0,"l":0.5,"c":1.5,"v":10.0,"S":"X","extra":1}"#,
            r#"{"t":"2024-01-04T05:00:00Z","o":1.0,"h":2.0,"l":0.5,"v":10.0,"S":"X"}"#,
            r#"{"t":"2024-01-05T05:00:00Z","o":-1.0,"h":2.0,"l":0.5,"c":1.5,"v":10.0,"S":"X"}"#,
            "not json",
            r#"{"t":"2024-01-02T05:00:00Z","o":1.0,"h":2.0,"l":0.5,"c":1.5,"v":10.0,"S":"X"}"#,
        ]
        .join("\n");
        let (r, _, _d) = run(&text, None);
        assert_eq!(r.rows.get("X"), Some(&1));
        let lines: Vec<u64> = r.bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6], "{:?}", r.bad);
        assert!(r.bad[0].reason.contains("extra"), "an unknown key is named: {}", r.bad[0].reason);
        assert!(r.bad[1].reason.contains("`c`"), "a missing price is named: {}", r.bad[1].reason);
        assert!(r.bad[4].reason.contains("repeats line 1"), "{}", r.bad[4].reason);
        // Nothing but bad lines: stopped after the first few, nothing stored.
        let (r, _, _d) = run(&["x"; 20].join("\n"), None);
        assert!(r.stopped && r.bad.len() == FIRST_ROWS_ALL_BAD && r.new_bars == 0);
    }
}
