//! Every alert the host sends, through the real delivery to a local HTTP receiver: each change once,
//! with the numbers a trader needs.

use super::*;
use crate::alerts::Alerts;
use crate::alerts::tests::Receiver;
use crate::config::Config;
use crate::domain::Symbol;
use crate::models::ModelKind;
use crate::retrain::gate::GateDecision;
use chrono::TimeZone;
use rust_decimal::Decimal;

fn record(outcome: RunOutcome, decision: Option<GateDecision>) -> RunRecord {
    RunRecord {
        id: "ppo-run-1".into(),
        kind: ModelKind::Ppo,
        trigger: "schedule".into(),
        clock_time: Utc::now(),
        started_at: Utc::now(),
        ended_at: Utc::now(),
        outcome,
        failure: None,
        snapshot: None,
        candidate: Some("ppo-new".into()),
        champion_before: Some("ppo-old".into()),
        champion_after: Some(if outcome == RunOutcome::Promoted { "ppo-new" } else { "ppo-old" }.into()),
        seed: None,
        train_metrics: Default::default(),
        trained_on: None,
        curves: Default::default(),
        candidate_metrics: None,
        champion_metrics: None,
        decision,
        candidates: Vec::new(),
    }
}

#[test]
fn each_change_is_alerted_once_with_its_numbers() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let r = Receiver::default();
    let base = rt.block_on(r.start());
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "mode = \"paper\"\nstate_dir = \"{}\"\n[market]\nsymbols = [\"AAPL\", \"MSFT\"]\ntimeframe = \"1Day\"\n[feed]\nkind = \"alpaca\"\n[web]\nenabled = false\n[notify]\nwebhook_url = \"{base}/hook\"\nfeed_down_mins = 5\n",
        dir.path().join("state").display()
    );
    let config = Config::parse(&dir.path().join("tradebot.toml"), &text).unwrap();
    let targets = crate::alerts::targets(&config.notify, |_| None).unwrap();
    let alerts = Alerts::start(targets, &config.notify, "paper", rt.handle());
    let mut host = crate::daemon::test_host(&config, &rt, None).with_alerts(alerts);
    let t0 = Utc.with_ymd_and_hms(2026, 11, 24, 15, 0, 0).unwrap();
    let sym = |s: &str| Symbol::new(s).unwrap();
    let mut view = EngineView {
        account: crate::daemon::host::Balance { equity: 94_812.5, cash: 10_000.0 },
        positions: vec![(sym("AAPL"), Decimal::from(10)), (sym("MSFT"), Decimal::from(5))],
        ..Default::default()
    };
    host.metrics.feed_connected.set(1);
    host.watch(&view, t0);
    // The kill switch, once however many times it is seen.
    view.kill_reason = Some("the day's loss of 5.19% reached risk.daily_loss_limit_pct (5%)".into());
    host.watch(&view, t0);
    host.watch(&view, t0);
    // The feed: down 4 minutes is nothing; 6 minutes is an alert, once; back is another.
    host.metrics.feed_connected.set(0);
    host.watch(&view, t0);
    host.watch(&view, t0 + chrono::Duration::minutes(4));
    host.watch(&view, t0 + chrono::Duration::minutes(6));
    host.watch(&view, t0 + chrono::Duration::minutes(7));
    host.metrics.feed_connected.set(1);
    host.watch(&view, t0 + chrono::Duration::minutes(9));
    // Daily summaries: each day's when the next day's first point comes.
    let day = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 21, 0, 0).unwrap();
    host.equity_point(day(23), 100_000.0, 100_000.0);
    host.equity_point(day(24), 101_234.56, 100_500.0);
    host.equity_point(day(25), 101_000.0, 100_700.0);
    // Retrains: promoted and kept with the gate's numbers, failed with why.
    let numbers = std::collections::BTreeMap::from([
        ("candidate_return".to_string(), 0.123),
        ("champion_return".to_string(), 0.05),
        ("buy_hold_return".to_string(), 0.08),
    ]);
    let decision = |promote| GateDecision { promote, reason: "the candidate leads".into(), numbers: numbers.clone() };
    host.alert_retrain(&record(RunOutcome::Promoted, Some(decision(true))));
    host.alert_retrain(&record(RunOutcome::Kept, Some(GateDecision { reason: "no lead".into(), ..decision(false) })));
    let mut failed = record(RunOutcome::Failed, None);
    failed.failure = Some(crate::retrain::record::Failure {
        stage: "train".into(),
        code: "child_exit".into(),
        message: "the training child exited with status 1".into(),
    });
    host.alert_retrain(&failed);
    // A protective sell that did not go out: an alert for each failure, none when nothing new failed.
    view.protect_failures.count = 1;
    view.protect_failures.last = Some("kill switch sell of AAPL refused: 403 potential wash trade detected".into());
    host.watch(&view, t0 + chrono::Duration::minutes(10));
    host.watch(&view, t0 + chrono::Duration::minutes(10));
    view.protect_failures.count = 2;
    host.watch(&view, t0 + chrono::Duration::minutes(11));

    let got = rt.block_on(r.wait_for(10));
    let events: Vec<&str> = got.iter().map(|(_, b)| b["event"].as_str().unwrap()).collect();
    assert_eq!(
        events,
        [
            "kill_switch",
            "feed_down",
            "feed_back",
            "daily_summary",
            "daily_summary",
            "promoted",
            "kept",
            "retrain_failed",
            "protect_failed",
            "protect_failed"
        ]
    );
    assert!(got[8].1["text"].as_str().unwrap().contains("wash trade"), "{}", got[8].1["text"]);
    assert_eq!(got[9].1["details"]["failures"], 2);
    let text = |i: usize| got[i].1["text"].as_str().unwrap().to_string();
    assert!(
        text(0).contains("5.19%") && text(0).contains("tradebot risk clear") && text(0).contains("94,812.50"),
        "{}",
        text(0)
    );
    assert_eq!(text(1), "market feed down for 6 min (since 15:00 UTC); reconnecting, no new bars meanwhile");
    assert_eq!(text(2), "market feed back after 9 min");
    assert_eq!(text(3), "2026-11-23: equity 100,000.00 (day +0.00, +0.00%), 2 positions");
    assert_eq!(text(4), "2026-11-24: equity 101,234.56 (day +1,234.56, +1.23%), 2 positions");
    assert_eq!(got[4].1["details"]["pnl"].as_f64().map(|x| (x * 100.0).round()), Some(123456.0));
    assert!(text(5).starts_with("retrain ppo: ppo-new promoted over ppo-old: the candidate leads."), "{}", text(5));
    assert!(text(5).contains("+12.3%") && text(5).contains("+5.0%"), "{}", text(5));
    assert_eq!(got[5].1["details"]["numbers"]["candidate_return"], 0.123);
    assert!(text(6).starts_with("retrain ppo: ppo-old kept, ppo-new refused: no lead."), "{}", text(6));
    assert_eq!(
        text(7),
        "retrain ppo failed: train failed (child_exit): the training child exited with status 1; ppo-old keeps trading."
    );
    assert!(got.iter().all(|(p, b)| p == "/hook" && b["mode"] == "paper"));
}
