//! The status as the state directory tells it, for `tradebot status` when no daemon answers (and for the
//! daemon's own report of its models): champions per kind from the registry, the last retrain and its
//! gate decision from the `runs` tree, the next scheduled retrain, stored positions priced at their last
//! bar, the last bar per symbol, and the persisted kill switch.

use crate::config::Config;
use crate::control::StatusReport;
use crate::control::status::{FeedStatus, ModelsStatus, PositionStatus, RiskStatus, STATUS_VERSION};
use crate::models::{ModelKind, Registry, RegistryError};
use crate::oms::PositionRecord;
use crate::retrain::record;
use crate::store::{Store, StoreError, TreeName};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Risk(#[from] crate::risk::RiskError),
}

/// Champions, the last retrain and the next one: what both the daemon and the offline status report.
pub fn models(config: &Config, store: &Store, now: DateTime<Utc>) -> Result<ModelsStatus, StatusError> {
    let reg = Registry::open(&config.state_dir.join("models"))?;
    let champion = |k| reg.champion(k).map(|m| m.map(|m| m.id));
    Ok(ModelsStatus {
        ppo: champion(ModelKind::Ppo)?,
        lstm: champion(ModelKind::Lstm)?,
        retraining: None,
        last_retrain: record::last(store)?.map(|r| r.to_status()),
        next_retrain: config.retrain.enabled.then(|| config.retrain.schedule.next_after(now)).flatten(),
    })
}

/// The report with no daemon running: everything the store and the registry hold.
pub fn from_store(config: &Config, store: &Store, now: DateTime<Utc>) -> Result<StatusReport, StatusError> {
    let tf = config.market.timeframe;
    let mut feed = FeedStatus { kind: format!("{:?}", config.feed.kind).to_lowercase(), ..Default::default() };
    let mut last_close = std::collections::BTreeMap::new();
    for s in &config.market.symbols {
        if let Some(t) = store.last_bar_time(s, tf)? {
            feed.last_bar.insert(s.to_string(), t);
            if let Some(b) = store.bars(s, tf, t, t)?.pop() {
                last_close.insert(s.to_string(), b.c);
            }
        }
    }
    let mut positions = Vec::new();
    for (k, p) in store.tree::<PositionRecord>(TreeName::Positions)?.scan_prefix(b"")? {
        let symbol = String::from_utf8_lossy(&k).to_string();
        let qty = p.qty.to_f64().unwrap_or(f64::NAN);
        if qty == 0.0 {
            continue;
        }
        let price = last_close.get(&symbol).copied().unwrap_or(f64::NAN);
        positions.push(PositionStatus { symbol, qty, price, value: qty * price });
    }
    let (kill, _) = crate::risk::stored_state(store)?;
    Ok(StatusReport {
        version: STATUS_VERSION,
        daemon_running: false,
        mode: format!("{:?}", config.mode).to_lowercase(),
        activity: "daemon not running".into(),
        feed,
        positions,
        models: models(config, store, now)?,
        risk: RiskStatus {
            kill_switch: kill.is_some(),
            kill_reason: kill.map(|k| k.reason),
            paused: false,
            gross_exposure: 0.0,
        },
        ..Default::default()
    })
}
