//! Data import and show across the AAPL split, bad rows and bad dates refused, errors that name their
//! cause once, and the backtest's tear sheet and fills.

use super::common::text;
use super::{config_in, tradebot};
use std::process::Output;

#[test]
fn import_then_show_has_no_split_jump() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("AAPL: 3270 bars"), "{}", text(&o));
    let o = tradebot(
        &["data", "show", "AAPL", "--from", "2005-02-24", "--to", "2005-03-02", "--json", "--config", cfg],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let days: Vec<&str> = rows.iter().map(|r| &r["t"].as_str().unwrap()[..10]).collect();
    assert_eq!(days, ["2005-02-24", "2005-02-25", "2005-02-28", "2005-03-01", "2005-03-02"]);
    for w in rows.windows(2) {
        let change = w[1]["c"].as_f64().unwrap() / w[0]["c"].as_f64().unwrap() - 1.0;
        assert!(change.abs() < 0.05, "jump of {change} between {} and {}", w[0]["t"], w[1]["t"]);
        for k in ["o", "h", "l", "c", "v"] {
            assert!(w[1][k].is_number(), "{k} missing");
        }
    }
    assert!(
        text(&tradebot(&["data", "import", "data/stocks-daily-2000-2013.csv.gz", "--config", cfg], &[]))
            .contains("read data/stocks-daily-2000-2013.csv.gz as CSV with a Ticker column")
    );
    // `data show --json`'s own output imports back (JSON lines of Alpaca bars), into another store, as the
    // same bars.
    let jsonl = dir.path().join("aapl.jsonl");
    std::fs::write(&jsonl, &o.stdout).unwrap();
    let other = tempfile::tempdir().unwrap();
    let cfg2 = config_in(other.path(), "", "");
    let cfg2 = cfg2.to_str().unwrap();
    let imp = tradebot(&["data", "import", jsonl.to_str().unwrap(), "--symbol", "AAPL", "--config", cfg2], &[]);
    assert!(imp.status.success(), "{}", text(&imp));
    assert!(
        text(&imp).contains("as JSON lines of Alpaca bars") && text(&imp).contains("AAPL: 5 bars"),
        "{}",
        text(&imp)
    );
    let again = tradebot(
        &["data", "show", "AAPL", "--from", "2005-02-24", "--to", "2005-03-02", "--json", "--config", cfg2],
        &[],
    );
    assert_eq!(String::from_utf8_lossy(&again.stdout), String::from_utf8_lossy(&o.stdout));
}

#[test]
fn bad_rows_exit_65_with_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, "Date,Open,High,Low,Close,Volume\n2020-01-02,1,2,0.5,1.5,10\n2020-01-03,1,2,0.5,NaN,10\n")
        .unwrap();
    let o =
        tradebot(&["data", "import", csv.to_str().unwrap(), "--symbol", "XYZ", "--config", cfg.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(65), "{}", text(&o));
    assert!(text(&o).contains("x.csv:3: close is NaN"), "{}", text(&o));
    assert!(text(&o).contains("XYZ: 1 bars"), "{}", text(&o));
}

/// Dates `data show` cannot use (past chrono's range, not a date, from after to) are refused naming the
/// flag, never a panic.
#[test]
fn data_show_refuses_bad_dates_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    for (from, to, needle) in [
        ("2005-01-01", "262143-12-31", "--to \"262143-12-31\" is not a date"),
        ("2005-13-01", "2005-01-10", "--from \"2005-13-01\" is not a date"),
        ("2005-02-01", "2005-01-10", "is after --to"),
    ] {
        let o = tradebot(&["data", "show", "AAPL", "--from", from, "--to", to, "--config", cfg], &[]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains(needle), "{needle}: {}", text(&o));
    }
}

/// Issue 36: an error says its cause once (`data import` of a missing file said the OS error twice), and
/// a backtest over a reversed or empty window says which window and the fix in one line, not "only 49
/// bars common to all of …" under a bare "error: backtest / caused by:".
#[test]
fn errors_name_the_thing_once_and_backtest_windows_say_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let cfg = cfg.to_str().unwrap();
    let o = tradebot(&["data", "import", "/nonexistent.csv", "--config", cfg], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "the OS error once:\n{err}");
    assert!(err.contains("/nonexistent.csv"), "{err}");

    let o = tradebot(&["models", "seed", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stderr).lines().filter(|l| !l.contains(" INFO ")).map(str::to_string).collect()
    };
    let o = tradebot(&["backtest", "--config", cfg, "--from", "2013-03-01", "--to", "2012-01-01"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        vec![
            "error: the backtest window 2013-03-01 to 2012-01-01 is reversed: its first day (--from) is after its last (--to); swap them"
        ]
    );
    let o = tradebot(&["backtest", "--config", cfg, "--from", "2020-03-01", "--to", "2021-01-01"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        vec![
            "error: no bars of AAPL, MSFT, IBM (common to all of them) in the backtest window 2020-03-01 to 2021-01-01; the stored ones run from 2000-03-01 to 2013-03-01: pick --from/--to within them, or import data (`tradebot data import`)"
        ]
    );
}

/// Issue 37: `backtest --report` writes one self-contained page whose numbers are the backtest's own (its
/// JSON embedded as `--json` prints it, the figures table formatted from it), and `--trades` the fills.
#[test]
fn backtest_writes_a_tear_sheet_with_its_own_numbers_and_the_fills_as_csv() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), "", "");
    let o = tradebot(&["models", "seed", "--config", cfg.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let (page, csv) = (dir.path().join("report.html"), dir.path().join("trades.csv"));
    let args = ["backtest", "--from", "2012-01-03", "--to", "2012-06-29", "--json", "--config", cfg.to_str().unwrap()];
    let o =
        tradebot(&[&args[..], &["--report", page.to_str().unwrap(), "--trades", csv.to_str().unwrap()]].concat(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    let start = html.find("<script type=\"application/json\" id=\"report\">").expect("the report's JSON is embedded");
    let body = &html[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let embedded: serde_json::Value = serde_json::from_str(&body.replace("<\\/", "</")).unwrap();
    assert_eq!(embedded, printed, "the page carries the backtest's own numbers");
    let total = printed["strategy"]["total_return"].as_f64().unwrap();
    assert!(html.contains(&format!("<tr><th>total return</th><td>{:.2}%</td>", total * 100.0)), "the figures table");
    for part in ["<svg", "id=\"months\"", "id=\"symbols\"", "id=\"trades\"", "Rolling Sharpe"] {
        assert!(html.contains(part), "the page lacks {part}");
    }
    assert!(!html.contains("<script src") && !html.contains("<link") && !html.contains("<img"), "self-contained");
    let rows: Vec<String> = std::fs::read_to_string(&csv).unwrap().lines().map(str::to_string).collect();
    assert_eq!(rows[0], "time,symbol,side,qty,price,notional,client_order_id");
    let trades = printed["strategy"]["trades"].as_u64().unwrap() as usize;
    assert!(trades > 0, "the demo window trades");
    assert_eq!(rows.len() - 1, trades, "one CSV row per fill the backtest counted");
    assert!(rows[1..].iter().all(|r| r.split(',').count() == 7 && r.contains(",tb-")), "{rows:?}");
}
