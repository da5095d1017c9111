//! The gate promotes what earns it (issue 17): on synthetic daily bars with a planted, learnable signal
//! (returns that trend for days at a time), a foreground `tradebot retrain --kind lstm` trains an LSTM
//! (the real child, cut-offs chosen on validation), backtests it on the holdout with the full risk checks
//! and, with no champion, promotes it only because it beats cash and buy-and-hold with the required
//! confidence. The same pipeline keeps random policies out (`retrain::tests`).
#![cfg(feature = "train")]

mod common;

use common::{root, text, tradebot};
use std::io::Write;
use std::path::Path;
use tradebot::env::rng::SplitMix64;

/// Two symbols over the shipped data's trading days: each day's log return is a regime's drift (±0.6%,
/// a regime lasting about ten days) plus noise, so the recent past says where the next days go.
fn planted_csv(path: &Path) {
    let gz = std::fs::File::open(root().join("data/stocks-daily-2000-2013.csv.gz")).unwrap();
    let mut rdr = csv::Reader::from_reader(flate2::read::GzDecoder::new(gz));
    let days: Vec<String> =
        rdr.records().map(|r| r.unwrap()).filter(|r| &r[0] == "AAPL").map(|r| r[1].to_string()).collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(out, "Ticker,Date,Open,High,Low,Close,Volume,Adj Close").unwrap();
    let mut rng = SplitMix64::new(17);
    for sym in ["AAA", "BBB"] {
        let (mut price, mut regime) = (100.0f64, 1.0f64);
        for d in &days {
            if rng.next_f64() < 0.1 {
                regime = -regime;
            }
            // Back towards 100 in the long run, so that the price stays in a sane range.
            let pull = -0.002 * (price / 100.0).ln();
            let z = (rng.next_f64() + rng.next_f64() + rng.next_f64() - 1.5) * 2.0;
            let open = price;
            price *= (0.006 * regime + pull + 0.006 * z).exp();
            let (hi, lo) = (open.max(price) * 1.004, open.min(price) * 0.996);
            writeln!(out, "{sym},{d},{open:.4},{hi:.4},{lo:.4},{price:.4},1000000,{price:.4}").unwrap();
        }
    }
}

#[test]
fn an_lstm_trained_on_a_planted_signal_is_promoted_over_cash_and_buy_and_hold() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("planted.csv");
    planted_csv(&csv);
    let cfg = dir.path().join("t.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"mode = "paper"
state_dir = {state:?}
[market]
symbols = ["AAA", "BBB"]
timeframe = "1Day"
[feed]
kind = "replay"
file = {csv:?}
[broker]
kind = "sim"
initial_cash = "100000"
[risk]
max_position_pct = 0.5
max_gross_exposure_pct = 1.0
max_order_notional = "80000"
daily_loss_limit_pct = 0.2
max_bar_age_secs = 345600
[train]
from = "2000-03-01"
to = "2009-12-31"
holdout_from = "2010-01-01"
holdout_to = "2013-03-01"
[lstm]
fast_len = 20
slow_len = 6
[retrain]
enabled = false
lstm_epochs = 40
[strategy]
mode = "lstm"
lstm_position_pct = 0.45
[web]
enabled = false
"#,
            state = dir.path().join("state").display().to_string(),
            csv = csv.display().to_string(),
        ),
    )
    .unwrap();
    let o = tradebot(&["retrain", "--config", cfg.to_str().unwrap(), "--kind", "lstm"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("strategy cut-offs chosen on validation"), "{out}");
    let line = out.lines().find(|l| l.contains(": promoted (")).unwrap_or_else(|| panic!("not promoted:\n{out}"));
    eprintln!("{line}");
    assert!(line.contains("no champion yet; candidate beats cash and buy-and-hold"), "{line}");
    // The decision's numbers, as `tradebot status` shows them.
    let s = tradebot(&["status", "--config", cfg.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&s)));
    let n = &v["models"]["last_retrain"]["numbers"];
    eprintln!("{n}");
    let f = |k: &str| n[k].as_f64().unwrap_or_else(|| panic!("no {k} in {n}"));
    assert!(f("candidate_return") > f("buy_hold_return"), "{n}");
    assert!(f("confidence_vs_cash") >= 0.9 && f("confidence_vs_buy_hold") >= 0.9, "{n}");
    let reg = tradebot::models::Registry::open(&dir.path().join("state/models")).unwrap();
    let champ = reg.champion(tradebot::models::ModelKind::Lstm).unwrap().expect("an LSTM champion");
    assert!(champ.params.contains_key("prob_up_cutoff"), "{:?}", champ.params);
}
