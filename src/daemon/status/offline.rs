//! The status as the state directory tells it, for `tradebot status` when no daemon answers (and for the
//! daemon's own report of its models): champions per kind from the registry, the last retrain and its
//! gate decision from the `runs` tree, the next scheduled retrain, the last bar per symbol, and the
//! persisted kill switch; the stored open orders; and the positions, equity, cash and prices of the
//! daemon's last published status (`Published`), marked with when that was, all from that one state
//! (the stored positions, priced at their last bar, when no status was ever published).

use crate::config::Config;
use crate::control::StatusReport;
use crate::control::report::{FeedStatus, ModelsStatus, OrderStatusLine, PositionStatus, RiskStatus, STATUS_VERSION};
use crate::live::view::order_line;
use crate::models::{ModelKind, Registry, RegistryError};
use crate::oms::{OmsOrder, PositionRecord};
use crate::retrain::record;
use crate::store::{Store, StoreError, TreeName};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;

#[derive(Debug, thiserror::Error)]
pub(crate) enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Risk(#[from] crate::risk::RiskError),
}

/// The status a daemon last published, kept in the `snapshot` tree for `tradebot status` while it is
/// stopped.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Published {
    pub at: DateTime<Utc>,
    pub report: StatusReport,
}

const PUBLISHED_KEY: &[u8] = b"last";

/// Keeps `report` as the last published status (not flushed at once: sled writes it within half a
/// second, and `Store::flush` at shutdown).
pub fn keep_published(store: &Store, report: &StatusReport, at: DateTime<Utc>) -> Result<(), StoreError> {
    store.tree::<Published>(TreeName::Snapshot)?.insert(PUBLISHED_KEY, &Published { at, report: report.clone() })
}

/// The last published status, if a daemon ever published one here.
pub(crate) fn last_published(store: &Store) -> Result<Option<Published>, StoreError> {
    store.tree::<Published>(TreeName::Snapshot)?.get(PUBLISHED_KEY)
}

/// The stored orders that are still open, as the status lists them.
pub(crate) fn stored_open_orders(store: &Store) -> Result<Vec<OrderStatusLine>, StoreError> {
    Ok(store
        .tree::<OmsOrder>(TreeName::Orders)?
        .scan_prefix(b"")?
        .into_iter()
        .map(|(_, o)| o)
        .filter(|o| !o.status.is_terminal())
        .map(|o| order_line(&o))
        .collect())
}

/// The stored positions, by symbol.
fn stored_positions(store: &Store) -> Result<Vec<(String, PositionRecord)>, StoreError> {
    Ok(store
        .tree::<PositionRecord>(TreeName::Positions)?
        .scan_prefix(b"")?
        .into_iter()
        .map(|(k, p)| (String::from_utf8_lossy(&k).to_string(), p))
        .collect())
}

/// The kind of champion the configured strategy needs and the registry lacks.
fn missing_champion(config: &Config, m: &ModelsStatus) -> Option<&'static str> {
    let mode = config.strategy.mode;
    [(ModelKind::Ppo, &m.ppo), (ModelKind::Lstm, &m.lstm)]
        .into_iter()
        .find(|(kind, champion)| mode.uses(*kind) && champion.is_none())
        .map(|(kind, _)| kind.as_str())
}

/// Champions, the last retrain and the next one: what both the daemon and the offline status report.
pub(crate) fn models(config: &Config, store: &Store, now: DateTime<Utc>) -> Result<ModelsStatus, StatusError> {
    // Read-only: the status never creates the registry's directory.
    let reg = Registry::open_read_only(&config.state_dir.join("models"));
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
pub(crate) fn from_store(config: &Config, store: &Store, now: DateTime<Utc>) -> Result<StatusReport, StatusError> {
    let tf = config.market.timeframe;
    let mut feed = FeedStatus { kind: config.feed.kind.to_string(), ..Default::default() };
    let mut last_close = std::collections::BTreeMap::new();
    for s in &config.market.symbols {
        if let Some(t) = store.last_bar_time(s, tf)? {
            feed.last_bar.insert(s.to_string(), t);
            if let Some(b) = store.bars(s, tf, t, t)?.pop() {
                last_close.insert(s.to_string(), b.c);
            }
        }
    }
    let published = last_published(store)?;
    // Prices: the daemon's last published ones (live prices), else the last stored bar's close.
    if let Some(p) = &published {
        for ps in &p.report.positions {
            if ps.price.is_finite() {
                last_close.insert(ps.symbol.clone(), ps.price);
            }
        }
        for (sym, t) in &p.report.feed.last_bar {
            let newer = feed.last_bar.get(sym).is_none_or(|stored| stored < t);
            if newer {
                feed.last_bar.insert(sym.clone(), *t);
            }
        }
    }
    // Positions from the same state as the equity and cash: the published status when there is one (a
    // replay's positions live in its own account store, which the published status reflects), else the
    // stored positions.
    let mut positions = Vec::new();
    if let Some(p) = &published {
        positions = p.report.positions.iter().filter(|x| x.qty != 0.0).cloned().collect();
    }
    let stored = if published.is_some() { Vec::new() } else { stored_positions(store)? };
    for (symbol, p) in stored {
        let qty = p.qty.to_f64().unwrap_or(f64::NAN);
        if qty == 0.0 {
            continue;
        }
        let price = last_close.get(&symbol).copied().unwrap_or(f64::NAN);
        positions.push(PositionStatus { symbol, qty, price, value: qty * price });
    }
    let (kill, _) = crate::risk::stored_state(store)?;
    let models = models(config, store, now)?;
    let mut activity = "daemon not running".to_string();
    if let Some(kind) = missing_champion(config, &models) {
        activity = format!(
            "daemon not running; {}: no {kind} champion fits this config, so the daemon trades nothing until a retrain promotes one (`tradebot retrain` trains one now)",
            crate::control::report::NO_MODEL
        );
    }
    Ok(StatusReport {
        version: STATUS_VERSION,
        daemon_running: false,
        mode: config.mode.to_string(),
        activity,
        feed,
        positions,
        models,
        open_orders: stored_open_orders(store)?,
        equity: published.as_ref().map_or(f64::NAN, |p| p.report.equity),
        cash: published.as_ref().map_or(f64::NAN, |p| p.report.cash),
        pnl_today: published.as_ref().map_or(f64::NAN, |p| p.report.pnl_today),
        as_of: published.as_ref().map(|p| p.at),
        risk: RiskStatus {
            kill_switch: kill.is_some(),
            kill_reason: kill.map(|k| k.reason),
            paused: published.as_ref().is_some_and(|p| p.report.risk.paused),
            gross_exposure: published.as_ref().map_or(0.0, |p| p.report.risk.gross_exposure),
        },
        ..Default::default()
    })
}
