//! Historical bars from files: `tradebot data import` reads OHLCV CSV (plain or gzip) into the store,
//! split-adjusting from the adjusted close, and reports every bad row with its line number.
//!
//! `import_file` tells the formats apart: a file whose first character is `{` is JSON lines of Alpaca bars
//! (`jsonl`); anything else is CSV, of two layouts, by their header (case-insensitive):
//! - `Ticker,Date,Open,High,Low,Close,Volume,Adj Close` (the shipped data; `Symbol` works for `Ticker`);
//! - `Date,Open,High,Low,Close,Volume[,Adj Close]` in any column order, one symbol per file, named with
//!   `--symbol` (Yahoo Finance's download, `Date,Open,High,Low,Close,Adj Close,Volume`, is one).
//!
//! A `Date` of `YYYY-MM-DD`, `M/D/YYYY` (Yahoo's US export) or `YYYY/MM/DD` is a daily bar stamped at
//! midnight America/New_York (Alpaca's convention); an RFC 3339 timestamp is taken as it is. A row whose
//! prices are all `null` (Yahoo's rows for days without trading) is skipped and counted, not an error; a
//! row with more or fewer fields than the header is a bad row. Line numbers are the file's lines.
//!
//! Adjustment: with an `Adj Close` column, `factor = adj_close / close`; open, high, low and close are
//! multiplied by it and volume divided by it, so a 2:1 split shows no -50% jump. The adjusted close also
//! carries dividends, so the factor moves slightly on ex-dividend days too: prices are total-return
//! adjusted, as most model training expects.

pub(crate) mod align;
mod ensure;
pub(crate) mod jsonl;
pub(crate) mod snapshot;

#[cfg(feature = "train")]
pub(crate) use align::align_bars;
pub(crate) use align::aligned_bars;
pub(crate) use ensure::ensure_bars;

use crate::domain::{Bar, Symbol, Timeframe};
use crate::store::{Store, StoreError};
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::America::New_York;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    #[error("cannot read {file}: {source}")]
    Io { file: String, source: std::io::Error },
    #[error("{file}: {reason}")]
    Layout { file: String, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why one row of a file is not a bar (the import reports it with its line and goes on).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum RowError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{name} {value:?} is not a number")]
    NotANumber { name: &'static str, value: String },
    #[error("{name} is {value}")]
    NotFinite { name: &'static str, value: String },
    #[error("date {0:?} is none of YYYY-MM-DD, M/D/YYYY, YYYY/MM/DD or an RFC 3339 timestamp (see --date-format)")]
    Date(String),
    #[error("no symbol")]
    NoSymbol,
    #[error("no \"S\" (symbol) in the line: name the file's symbol with --symbol SYMBOL")]
    NoSymbolInLine,
    #[error("adj close {adj} and close {close} must both be above zero")]
    Adjustment { adj: f64, close: f64 },
    #[error("not a bar: {0}")]
    NotABar(String),
    #[error(transparent)]
    Symbol(#[from] crate::domain::SymbolError),
    #[error(transparent)]
    Bar(#[from] crate::domain::BarError),
}

/// A row that was not imported, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadRow {
    pub line: u64,
    pub reason: String,
}

#[derive(Debug, Default)]
pub(crate) struct ImportReport {
    /// The format read, in words.
    pub format: &'static str,
    /// Rows read per symbol (imported or already present).
    pub rows: BTreeMap<String, usize>,
    /// Bars that were not in the store before.
    pub new_bars: usize,
    /// Rows skipped because `--symbols` did not list their symbol.
    pub filtered: usize,
    /// Rows without prices (`null`), skipped.
    pub empty: usize,
    pub bad: Vec<BadRow>,
    /// The import stopped after `FIRST_ROWS_ALL_BAD` bad rows without one good row.
    pub stopped: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct ImportOptions {
    /// Only these symbols (multi-symbol layout). Empty: all.
    pub symbols: Vec<Symbol>,
    /// The symbol of a single-symbol file.
    pub symbol: Option<Symbol>,
    pub timeframe: Timeframe,
    /// A chrono date format (e.g. `%d.%m.%Y`) for dates none of the built-in ones read.
    pub date_format: Option<String>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { symbols: Vec::new(), symbol: None, timeframe: Timeframe::DAY1, date_format: None }
    }
}

/// A file whose first rows all fail is stopped after this many: the layout or the date format is wrong,
/// and thousands of identical errors help nobody.
pub(crate) const FIRST_ROWS_ALL_BAD: usize = 5;

struct Columns {
    ticker: Option<usize>,
    date: usize,
    open: usize,
    high: usize,
    low: usize,
    close: usize,
    volume: usize,
    adj: Option<usize>,
}

fn columns(headers: &csv::StringRecord, file: &str) -> Result<Columns, ImportError> {
    let find = |names: &[&str]| headers.iter().position(|h| names.iter().any(|n| h.trim().eq_ignore_ascii_case(n)));
    let need = |name: &str| {
        find(&[name]).ok_or_else(|| ImportError::Layout {
            file: file.to_string(),
            reason: format!(
                "no {name:?} column in the header {:?}: expected Ticker,Date,Open,High,Low,Close,Volume,Adj Close or Date,Open,High,Low,Close,Volume[,Adj Close]",
                headers.iter().collect::<Vec<_>>().join(",")
            ),
        })
    };
    Ok(Columns {
        ticker: find(&["ticker", "symbol"]),
        date: need("date")?,
        open: need("open")?,
        high: need("high")?,
        low: need("low")?,
        close: need("close")?,
        volume: need("volume")?,
        adj: find(&["adj close", "adj_close", "adjclose", "adjusted close"]),
    })
}

/// Opens a file, gunzipping it when it starts with the gzip magic bytes.
pub(crate) fn open_maybe_gz(path: &Path) -> Result<Box<dyn Read>, ImportError> {
    let file = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|source| ImportError::Io { file: file.clone(), source })?;
    let mut r = BufReader::new(f);
    let magic = r.fill_buf().map_err(|source| ImportError::Io { file, source })?;
    if magic.starts_with(&[0x1f, 0x8b]) { Ok(Box::new(flate2::read::GzDecoder::new(r))) } else { Ok(Box::new(r)) }
}

/// Daily bars are stamped at midnight New York time, as Alpaca stamps its daily bars.
pub(crate) fn daily_bar_time(d: NaiveDate) -> DateTime<Utc> {
    let midnight = d.and_hms_opt(0, 0, 0).unwrap_or_default();
    match New_York.from_local_datetime(&midnight).earliest() {
        Some(t) => t.with_timezone(&Utc),
        None => Utc.from_utc_datetime(&midnight),
    }
}

/// The days an open end of a date window reaches (`[train]` or `[feed]` without `from` or `to`): before and
/// after any bar.
const OPEN_FROM: NaiveDate = NaiveDate::from_ymd_opt(1800, 1, 1).expect("a valid date");
const OPEN_TO: NaiveDate = NaiveDate::from_ymd_opt(2300, 1, 1).expect("a valid date");

/// The bar times of the days `from ..= to`: from the first day's daily bar to the last instant of the last
/// day (New York dates); an open end reaches every stored bar on that side.
pub(crate) fn day_window(from: Option<NaiveDate>, to: Option<NaiveDate>) -> (DateTime<Utc>, DateTime<Utc>) {
    let first = daily_bar_time(from.unwrap_or(OPEN_FROM));
    let last = daily_bar_time(to.unwrap_or(OPEN_TO)) + chrono::Duration::days(1) - chrono::Duration::microseconds(1);
    (first, last)
}

fn parse_time(s: &str, custom: Option<&str>) -> Result<DateTime<Utc>, RowError> {
    let s = s.trim();
    for format in custom.into_iter().chain(["%Y-%m-%d", "%m/%d/%Y", "%Y/%m/%d"]) {
        if let Ok(d) = NaiveDate::parse_from_str(s, format) {
            return Ok(daily_bar_time(d));
        }
    }
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).map_err(|_| RowError::Date(s.to_string()))
}

fn number(rec: &csv::StringRecord, idx: usize, name: &'static str) -> Result<f64, RowError> {
    let s = rec.get(idx).ok_or(RowError::Missing(name))?.trim();
    let x: f64 = s.parse().map_err(|_| RowError::NotANumber { name, value: s.to_string() })?;
    if x.is_finite() { Ok(x) } else { Err(RowError::NotFinite { name, value: s.to_string() }) }
}

/// Imports a file of bars into the store, JSON lines or CSV by its first character (see the module's
/// documentation); the report names the format it read.
pub(crate) fn import_file(store: &Store, path: &Path, opts: &ImportOptions) -> Result<ImportReport, ImportError> {
    let file = path.display().to_string();
    let mut reader = BufReader::new(open_maybe_gz(path)?);
    let first = loop {
        let buf = reader.fill_buf().map_err(|source| ImportError::Io { file: file.clone(), source })?;
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => break Some(buf[i]),
            None if buf.is_empty() => break None,
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    };
    if first == Some(b'{') {
        // Line numbers count from the file's start: read it again from there.
        return jsonl::import(store, BufReader::new(open_maybe_gz(path)?), &file, opts);
    }
    import_csv(store, path, opts)
}

/// Imports a CSV file into the store. Good rows are stored even when some rows are bad; every bad row is
/// in the report with its line number.
pub(crate) fn import_csv(store: &Store, path: &Path, opts: &ImportOptions) -> Result<ImportReport, ImportError> {
    let file = path.display().to_string();
    let reader = open_maybe_gz(path)?;
    let mut rdr = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(reader);
    let headers = rdr.headers().map_err(|e| ImportError::Layout { file: file.clone(), reason: e.to_string() })?.clone();
    let cols = columns(&headers, &file)?;
    // The csv reader does not count the header's CRLF as a line end: its record lines then run one short
    // of the file's. The header is line 1, so the first record starts on line 2.
    let line_fix = 2u64.saturating_sub(rdr.position().line());
    if cols.ticker.is_none() && opts.symbol.is_none() {
        return Err(ImportError::Layout {
            file,
            reason: "this file has no Ticker column: name its symbol with --symbol SYMBOL".into(),
        });
    }
    let wanted: HashSet<&Symbol> = opts.symbols.iter().collect();
    let format = match (cols.ticker, cols.adj) {
        (Some(_), _) => "CSV with a Ticker column (Ticker,Date,Open,High,Low,Close,Volume[,Adj Close])",
        (None, Some(_)) => "one symbol's CSV with Adj Close (Yahoo Finance's layout)",
        (None, None) => "one symbol's CSV (Date,Open,High,Low,Close,Volume)",
    };
    let mut report = ImportReport { format, ..Default::default() };
    let mut seen: HashMap<(Symbol, DateTime<Utc>), u64> = HashMap::new();
    let mut batch = Vec::with_capacity(8192);
    for rec in rdr.records() {
        if report.bad.len() >= FIRST_ROWS_ALL_BAD && report.rows.is_empty() && report.filtered == 0 {
            report.stopped = true;
            break;
        }
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map(|p| p.line() + line_fix).unwrap_or(0);
                report.bad.push(BadRow { line, reason: format!("unreadable row: {e}") });
                continue;
            }
        };
        let line = rec.position().map(|p| p.line() + line_fix).unwrap_or(0);
        if rec.len() != headers.len() {
            let reason = format!("{} fields where the header has {}", rec.len(), headers.len());
            report.bad.push(BadRow { line, reason });
            continue;
        }
        if [cols.open, cols.high, cols.low, cols.close]
            .iter()
            .all(|i| rec.get(*i).is_some_and(|v| v.eq_ignore_ascii_case("null")))
        {
            report.empty += 1;
            continue;
        }
        match parse_row(&rec, &cols, opts) {
            Ok(bar) => {
                if !wanted.is_empty() && !wanted.contains(&bar.symbol) {
                    report.filtered += 1;
                    continue;
                }
                if let Some(first) = seen.insert((bar.symbol.clone(), bar.t), line) {
                    report.bad.push(BadRow {
                        line,
                        reason: format!("{} {} repeats line {first}", bar.symbol, bar.t.date_naive()),
                    });
                    continue;
                }
                *report.rows.entry(bar.symbol.to_string()).or_default() += 1;
                batch.push(bar);
                if batch.len() == batch.capacity() {
                    report.new_bars += store.put_bars(&batch)?;
                    batch.clear();
                }
            }
            Err(reason) => report.bad.push(BadRow { line, reason: reason.to_string() }),
        }
    }
    report.new_bars += store.put_bars(&batch)?;
    Ok(report)
}

fn parse_row(rec: &csv::StringRecord, c: &Columns, opts: &ImportOptions) -> Result<Bar, RowError> {
    let symbol = match (c.ticker, &opts.symbol) {
        (_, Some(s)) => s.clone(),
        (Some(i), None) => Symbol::new(rec.get(i).unwrap_or(""))?,
        (None, None) => return Err(RowError::NoSymbol),
    };
    let t = parse_time(rec.get(c.date).ok_or(RowError::Missing("date"))?, opts.date_format.as_deref())?;
    let (o, h, l, cl, v) = (
        number(rec, c.open, "open")?,
        number(rec, c.high, "high")?,
        number(rec, c.low, "low")?,
        number(rec, c.close, "close")?,
        number(rec, c.volume, "volume")?,
    );
    let factor = match c.adj {
        Some(i) if rec.get(i).is_some_and(|s| !s.trim().is_empty()) => {
            let adj = number(rec, i, "adj close")?;
            if adj <= 0.0 || cl <= 0.0 {
                return Err(RowError::Adjustment { adj, close: cl });
            }
            adj / cl
        }
        _ => 1.0,
    };
    Ok(Bar::new(symbol, opts.timeframe, t, o * factor, h * factor, l * factor, cl * factor, v / factor)?)
}

#[cfg(test)]
mod tests;
