use super::*;
use chrono::Duration;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn all(store: &Store, sym: &str) -> Vec<Bar> {
    let from = Utc.with_ymd_and_hms(1990, 1, 1, 0, 0, 0).unwrap();
    store.bars(&Symbol::new(sym).unwrap(), Timeframe::DAY1, from, from + Duration::days(365 * 50)).unwrap()
}

#[test]
fn shipped_file_imports_split_adjusted_without_the_aapl_jump() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/stocks-daily-2000-2013.csv.gz");
    let opts =
        ImportOptions { symbols: vec![Symbol::new("AAPL").unwrap(), Symbol::new("FB").unwrap()], ..Default::default() };
    let r = import_csv(&store, &path, &opts).unwrap();
    assert!(r.bad.is_empty(), "{:?}", r.bad);
    assert_eq!(r.rows.get("AAPL"), Some(&3270));
    assert_eq!(r.rows.get("FB"), Some(&196));
    assert_eq!(r.filtered, 3270 * 2 + 2148);
    assert_eq!(r.new_bars, 3270 + 196);
    let aapl = all(&store, "AAPL");
    let i = aapl.iter().position(|b| b.t.date_naive() == NaiveDate::from_ymd_opt(2005, 2, 28).unwrap()).unwrap();
    let change = aapl[i].c / aapl[i - 1].c - 1.0;
    assert!(change.abs() < 0.05, "split day close-to-close change {change}");
    // Midnight New York in winter is 05:00 UTC.
    assert_eq!(aapl[i].t, Utc.with_ymd_and_hms(2005, 2, 28, 5, 0, 0).unwrap());
    // A second import adds nothing.
    assert_eq!(import_csv(&store, &path, &opts).unwrap().new_bars, 0);
}

#[test]
fn bad_rows_are_reported_with_line_numbers_and_good_rows_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    let csv = "Date,Open,High,Low,Close,Volume\n\
               2020-01-02,10,11,9,10.5,100\n\
               2020-01-03,10,11,9,abc,100\n\
               2020-01-06,10,9,11,10,100\n\
               2020-13-01,10,11,9,10,100\n\
               2020-01-07,10,11,9,10,-5\n\
               2020-01-02,10,11,9,10,100\n\
               2020-01-08,10,11,9,10.25,100\n";
    let p = write(dir.path(), "x.csv", csv);
    let opts = ImportOptions { symbol: Some(Symbol::new("XYZ").unwrap()), ..Default::default() };
    let r = import_csv(&store, &p, &opts).unwrap();
    let lines: Vec<u64> = r.bad.iter().map(|b| b.line).collect();
    assert_eq!(lines, vec![3, 4, 5, 6, 7], "{:?}", r.bad);
    assert!(r.bad[0].reason.contains("close \"abc\" is not a number"));
    assert!(r.bad[1].reason.contains("high 9 is below low 11"));
    assert!(r.bad[2].reason.contains("none of YYYY-MM-DD, M/D/YYYY"));
    assert!(r.bad[3].reason.contains("volume"));
    assert!(r.bad[4].reason.contains("repeats line 2"));
    assert_eq!(all(&store, "XYZ").iter().map(|b| b.c).collect::<Vec<_>>(), vec![10.5, 10.25]);
}

#[test]
fn single_symbol_layout_needs_symbol_and_header_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    let p = write(dir.path(), "x.csv", "Date,Open,High,Low,Close,Volume\n2020-01-02,1,1,1,1,1\n");
    let e = import_csv(&store, &p, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("--symbol"), "{e}");
    let p = write(dir.path(), "y.csv", "when,open\n");
    let e = import_csv(&store, &p, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no \"date\" column"), "{e}");
}

#[test]
fn adjusted_close_scales_prices_and_volume() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    let p = write(
        dir.path(),
        "x.csv",
        "Ticker,Date,Open,High,Low,Close,Volume,Adj Close\nQQ,2020-01-02,100,110,90,100,1000,50\n",
    );
    import_csv(&store, &p, &ImportOptions::default()).unwrap();
    let b = &all(&store, "QQ")[0];
    assert_eq!((b.o, b.h, b.l, b.c, b.v), (50.0, 55.0, 45.0, 50.0, 2000.0));
}

#[test]
fn a_yahoo_download_imports_with_file_line_numbers_null_rows_skipped_and_extra_fields_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    // Yahoo's column order and US dates, CRLF line ends, a null row, a row with an extra field.
    let csv = "Date,Open,High,Low,Close,Adj Close,Volume\r\n\
               1/4/1999,10,11,9,10,5,100\r\n\
               1/5/1999,null,null,null,null,null,null\r\n\
               1/6/1999,10,11,9,10,5,100,7\r\n\
               1/7/1999,10,11,9,10.5,5.25,100\r\n";
    let p = write(dir.path(), "yahoo.csv", csv);
    let opts = ImportOptions { symbol: Some(Symbol::new("XYZ").unwrap()), ..Default::default() };
    let r = import_csv(&store, &p, &opts).unwrap();
    assert_eq!(r.empty, 1);
    assert_eq!(r.bad.len(), 1, "{:?}", r.bad);
    assert_eq!(r.bad[0].line, 4, "the file's line, header included");
    assert!(r.bad[0].reason.contains("8 fields where the header has 7"), "{}", r.bad[0].reason);
    let bars = all(&store, "XYZ");
    assert_eq!(bars.len(), 2);
    assert_eq!(bars[0].t, Utc.with_ymd_and_hms(1999, 1, 4, 5, 0, 0).unwrap(), "1/4/1999 is January 4th");
    assert_eq!((bars[0].c, bars[0].v), (5.0, 200.0), "adjusted by Adj Close whatever its column");
}

#[test]
fn a_file_whose_first_rows_all_fail_stops_and_date_format_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    let rows: String = (1..=20).map(|d| format!("{d:02}.01.2021,10,11,9,10,100\n")).collect();
    let p = write(dir.path(), "de.csv", &format!("Date,Open,High,Low,Close,Volume\n{rows}"));
    let mut opts = ImportOptions { symbol: Some(Symbol::new("XYZ").unwrap()), ..Default::default() };
    let r = import_csv(&store, &p, &opts).unwrap();
    assert!(r.stopped, "{r:?}");
    assert_eq!(r.bad.len(), FIRST_ROWS_ALL_BAD, "stopped after the first rows, not 20 errors");
    assert!(r.bad[0].reason.contains("--date-format"), "{}", r.bad[0].reason);
    opts.date_format = Some("%d.%m.%Y".into());
    let r = import_csv(&store, &p, &opts).unwrap();
    assert!(r.bad.is_empty() && !r.stopped, "{r:?}");
    assert_eq!(r.rows["XYZ"], 20);
}

#[test]
fn a_day_window_runs_from_the_first_days_bar_to_the_last_instant_of_the_last_day() {
    let d = |y, m, day| chrono::NaiveDate::from_ymd_opt(y, m, day).unwrap();
    let (from, to) = super::day_window(Some(d(2012, 3, 15)), Some(d(2012, 6, 22)));
    assert_eq!(from, super::daily_bar_time(d(2012, 3, 15)));
    assert_eq!(to + chrono::Duration::microseconds(1), super::daily_bar_time(d(2012, 6, 23)));
    // Open ends reach every bar on their side (from 1800 to 2300).
    let (from, to) = super::day_window(None, None);
    assert!(from < super::daily_bar_time(d(1900, 1, 1)) && to > super::daily_bar_time(d(2200, 1, 1)));
}
