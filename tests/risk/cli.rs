//! `tradebot risk status` and `tradebot risk clear` over a kill switch tripped by the daily loss limit:
//! it shows as tripped in every new process (a restart) until cleared, and the clear names who did it.

use super::{demo_config_in, text, tradebot};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use tradebot::DailyLoss;
use tradebot::KillSwitchAction;
use tradebot::store::Store;

fn status(cfg: &str) -> serde_json::Value {
    let o = tradebot(&["risk", "status", "--config", cfg, "--json"], &[]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

#[test]
fn a_tripped_kill_switch_shows_in_status_until_risk_clear_names_who_cleared_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config_in(dir.path());
    let cfg = cfg.to_str().unwrap();
    let t0: DateTime<Utc> = "2024-03-11T14:00:00Z".parse().unwrap();
    {
        let store = Store::open(&dir.path().join("state")).unwrap();
        let mut loss = DailyLoss::open(&store, 0.05, KillSwitchAction::Flatten).unwrap();
        assert!(loss.on_equity(t0, Decimal::from(100_000)).unwrap().is_none());
        assert!(loss.on_equity(t0 + chrono::Duration::minutes(5), Decimal::from(94_000)).unwrap().is_some());
    }
    for _ in 0..2 {
        let s = status(cfg);
        assert_eq!(s["tripped"], true, "{s}");
        assert_eq!(s["kill_switch"]["equity"], "94000", "{s}");
        assert_eq!(s["kill_switch"]["action"], "flatten", "{s}");
        assert_eq!(s["day_open"]["equity"], "100000", "{s}");
    }
    let o = tradebot(&["risk", "status", "--config", cfg], &[]).output().unwrap();
    assert!(text(&o).contains("kill switch: TRIPPED at 2024-03-11 14:05:00 UTC"), "{}", text(&o));

    let o = tradebot(&["risk", "clear", "--config", cfg], &[("USER", "alice")]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("kill switch cleared by alice at"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("risk: kill switch cleared by alice at"), "{}", text(&o));
    let s = status(cfg);
    assert_eq!(s["tripped"], false, "{s}");
    assert!(s["kill_switch"].is_null() && s["day_open"].is_null(), "{s}");
    let o = tradebot(&["risk", "clear", "--config", cfg], &[("USER", "bob")]).output().unwrap();
    assert!(o.status.success() && text(&o).contains("was not tripped"), "{}", text(&o));
}
