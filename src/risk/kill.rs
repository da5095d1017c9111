//! The daily loss limit and its kill switch, persisted in the store's `kv` tree.
//!
//! `DailyLoss::on_equity(now, equity)` keeps the trading day's opening equity (the first equity seen on
//! each New York date, key `risk.day_open`) and trips when `open - equity >= daily_loss_limit_pct × open`
//! (exactly at the limit, not before). The tripped state (when, why, the equity numbers, halt or flatten;
//! key `risk.kill_switch`) is written and the store flushed before `on_equity` returns, and loaded at
//! open: the switch stays tripped across restarts until `clear` (`tradebot risk clear`) removes it.
//! Clearing also forgets the day's opening equity, so the limit counts again from the next equity seen
//! rather than re-tripping at once on the same loss.

use super::context::dec;
use super::hours::trading_day;
use crate::config::KillSwitchAction;
use crate::store::{Store, StoreError, TreeName, TypedTree};
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

pub const KILL_SWITCH_KEY: &[u8] = b"risk.kill_switch";
pub const DAY_OPEN_KEY: &[u8] = b"risk.day_open";

/// The tripped kill switch, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillSwitchState {
    pub tripped_at: DateTime<Utc>,
    pub reason: String,
    /// The New York trading day it tripped on.
    pub day: NaiveDate,
    pub open_equity: Decimal,
    pub equity: Decimal,
    /// (open - equity) / open.
    pub loss_pct: Decimal,
    pub limit_pct: Decimal,
    pub action: KillSwitchAction,
}

/// The trading day's opening equity, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayOpen {
    pub day: NaiveDate,
    pub equity: Decimal,
    pub at: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
pub enum RiskError {
    #[error("risk state in the store: {0}")]
    Store(#[from] StoreError),
}

/// The daily loss tracker with its persisted kill switch.
pub struct DailyLoss {
    store: Store,
    kill_tree: TypedTree<KillSwitchState>,
    day_tree: TypedTree<DayOpen>,
    limit_pct: Decimal,
    action: KillSwitchAction,
    tripped: Option<KillSwitchState>,
    day_open: Option<DayOpen>,
}

impl DailyLoss {
    /// Loads the stored state (a tripped switch stays tripped).
    pub fn open(store: &Store, limit_pct: f64, action: KillSwitchAction) -> Result<Self, RiskError> {
        let kill_tree: TypedTree<KillSwitchState> = store.tree(TreeName::Kv)?;
        let day_tree: TypedTree<DayOpen> = store.tree(TreeName::Kv)?;
        let tripped = kill_tree.get(KILL_SWITCH_KEY)?;
        let day_open = day_tree.get(DAY_OPEN_KEY)?;
        if let Some(k) = &tripped {
            log::error!(
                "risk: the kill switch is tripped since {} ({}); no new orders until `tradebot risk clear`",
                k.tripped_at,
                k.reason
            );
        }
        let limit_pct = dec(limit_pct).unwrap_or(Decimal::ZERO);
        Ok(DailyLoss { store: store.clone(), kill_tree, day_tree, limit_pct, action, tripped, day_open })
    }

    pub fn tripped(&self) -> Option<&KillSwitchState> {
        self.tripped.as_ref()
    }

    pub fn day_open(&self) -> Option<&DayOpen> {
        self.day_open.as_ref()
    }

    /// A new equity figure. Returns the state when this call tripped the switch (it is on disk by then).
    pub fn on_equity(&mut self, now: DateTime<Utc>, equity: Decimal) -> Result<Option<KillSwitchState>, RiskError> {
        if self.tripped.is_some() {
            return Ok(None);
        }
        let day = trading_day(now);
        let open = match &self.day_open {
            Some(d) if d.day == day => d.equity,
            _ => {
                let d = DayOpen { day, equity, at: now };
                self.day_tree.insert(DAY_OPEN_KEY, &d)?;
                self.store.flush()?;
                log::debug!("risk: trading day {day} opens with equity {equity:.2}");
                self.day_open = Some(d);
                equity
            }
        };
        if open <= Decimal::ZERO || open - equity < self.limit_pct * open {
            return Ok(None);
        }
        let loss_pct = (open - equity) / open;
        let state = KillSwitchState {
            tripped_at: now,
            reason: format!(
                "daily loss {:.4}% of the opening equity {open} reached the limit {:.4}% (equity {equity})",
                loss_pct * Decimal::ONE_HUNDRED,
                self.limit_pct * Decimal::ONE_HUNDRED
            ),
            day,
            open_equity: open,
            equity,
            loss_pct,
            limit_pct: self.limit_pct,
            action: self.action,
        };
        self.kill_tree.insert(KILL_SWITCH_KEY, &state)?;
        self.store.flush()?;
        log::error!("risk: KILL SWITCH TRIPPED: {}; action {:?}", state.reason, state.action);
        self.tripped = Some(state.clone());
        Ok(Some(state))
    }

    /// Trips the switch by hand (e.g. an operator or a fatal condition), persisted like a loss trip.
    pub fn trip(&mut self, now: DateTime<Utc>, reason: &str, equity: Decimal) -> Result<KillSwitchState, RiskError> {
        if let Some(k) = &self.tripped {
            return Ok(k.clone());
        }
        let open = self.day_open.as_ref().map_or(equity, |d| d.equity);
        let loss_pct = if open > Decimal::ZERO { (open - equity) / open } else { Decimal::ZERO };
        let state = KillSwitchState {
            tripped_at: now,
            reason: reason.to_string(),
            day: trading_day(now),
            open_equity: open,
            equity,
            loss_pct,
            limit_pct: self.limit_pct,
            action: self.action,
        };
        self.kill_tree.insert(KILL_SWITCH_KEY, &state)?;
        self.store.flush()?;
        log::error!("risk: KILL SWITCH TRIPPED: {reason}; action {:?}", state.action);
        self.tripped = Some(state.clone());
        Ok(state)
    }
}

/// Reads the stored kill switch and day opening equity without taking over the tracker.
pub fn stored_state(store: &Store) -> Result<(Option<KillSwitchState>, Option<DayOpen>), RiskError> {
    let k: TypedTree<KillSwitchState> = store.tree(TreeName::Kv)?;
    let d: TypedTree<DayOpen> = store.tree(TreeName::Kv)?;
    Ok((k.get(KILL_SWITCH_KEY)?, d.get(DAY_OPEN_KEY)?))
}

/// Clears a tripped kill switch (and the day's opening equity), flushed; logs who cleared it and when.
/// Returns the state that was cleared, `None` when it was not tripped.
pub fn clear(store: &Store, who: &str, now: DateTime<Utc>) -> Result<Option<KillSwitchState>, RiskError> {
    let k: TypedTree<KillSwitchState> = store.tree(TreeName::Kv)?;
    let d: TypedTree<DayOpen> = store.tree(TreeName::Kv)?;
    let was = k.get(KILL_SWITCH_KEY)?;
    if was.is_some() {
        k.remove(KILL_SWITCH_KEY)?;
        d.remove(DAY_OPEN_KEY)?;
        store.flush()?;
    }
    match &was {
        Some(s) => {
            log::warn!("risk: kill switch cleared by {who} at {now} (it tripped at {}: {})", s.tripped_at, s.reason)
        }
        None => log::info!("risk: kill switch clear by {who} at {now}: it was not tripped"),
    }
    Ok(was)
}
