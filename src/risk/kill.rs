//! The daily loss limit and its kill switch, persisted in the store's `kv` tree.
//!
//! `DailyLoss::on_equity(now, equity)` keeps the trading day's reference equity (key `risk.day_open`): the
//! equity at the previous session's close, i.e. the last equity seen on an earlier New York trading day
//! (key `risk.last_equity` in the `snapshot` tree, written with every figure but not flushed on each:
//! sled writes it out within its flush interval, so a restart keeps it without an fsync per minute or per
//! backtest bar; a crash loses at most that interval of figures), or, with no earlier figure
//! (a new state directory, or after a clear), the first equity seen today. The reference is a critical
//! write, flushed by the engine's group commit with the bar's orders (one flush per bar, also on `1Day`
//! where every close opens a day), or at once outside a group. It trips when
//! `reference - equity >= daily_loss_limit_pct × reference` (exactly at the limit, not before). The caller
//! marks to market as often as it can (every bar, every minute bar between two bars of a longer timeframe,
//! every fill and account update): on `1Day` a day's loss is seen against the previous close, not against
//! the day bar's own close. The tripped state (when, why, the equity numbers, halt or flatten;
//! key `risk.kill_switch`) is written and the store flushed before `on_equity` returns, and loaded at
//! open: the switch stays tripped across restarts until `clear` (`tradebot risk clear`) removes it.
//! Clearing also forgets the day's reference and the last figure, so the limit counts again from the next
//! equity seen rather than re-tripping at once on the same loss.

use super::context::dec;
use super::hours::trading_day;
use crate::config::KillSwitchAction;
use crate::store::{Store, StoreError, TreeName, TypedTree};
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

pub(crate) const KILL_SWITCH_KEY: &[u8] = b"risk.kill_switch";
pub(crate) const DAY_OPEN_KEY: &[u8] = b"risk.day_open";
pub(super) const LAST_EQUITY_KEY: &[u8] = b"risk.last_equity";

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

/// An equity figure of a trading day, as stored: the day's reference (`risk.day_open`: the previous
/// close, taken at `at`) or the last figure seen (`risk.last_equity`).
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
    /// The last figure seen (stored, not flushed: sled writes it out within its flush interval).
    last: Option<DayOpen>,
    last_tree: TypedTree<DayOpen>,
}

impl DailyLoss {
    /// Loads the stored state (a tripped switch stays tripped).
    pub fn open(store: &Store, limit_pct: f64, action: KillSwitchAction) -> Result<Self, RiskError> {
        let kill_tree: TypedTree<KillSwitchState> = store.tree(TreeName::Kv)?;
        let day_tree: TypedTree<DayOpen> = store.tree(TreeName::Kv)?;
        let tripped = kill_tree.get(KILL_SWITCH_KEY)?;
        let day_open = day_tree.get(DAY_OPEN_KEY)?;
        let last_tree: TypedTree<DayOpen> = store.tree(TreeName::Snapshot)?;
        let last = last_tree.get(LAST_EQUITY_KEY)?;
        if let Some(k) = &tripped {
            log::error!(
                "risk: the kill switch is tripped since {} ({}); no new orders until `tradebot risk clear`",
                k.tripped_at,
                k.reason
            );
        }
        let limit_pct = dec(limit_pct).unwrap_or(Decimal::ZERO);
        Ok(DailyLoss {
            store: store.clone(),
            kill_tree,
            day_tree,
            limit_pct,
            action,
            tripped,
            day_open,
            last,
            last_tree,
        })
    }

    /// The kill switch's state when it is tripped (when, why, the equity numbers); `None` when it is not.
    pub fn tripped(&self) -> Option<&KillSwitchState> {
        self.tripped.as_ref()
    }

    /// The trading day's reference equity (the previous session's last figure, else the day's first), once set.
    pub fn day_open(&self) -> Option<&DayOpen> {
        self.day_open.as_ref()
    }

    /// A new equity figure. Returns the state when this call tripped the switch (it is on disk by then).
    /// A figure stamped before the last one seen (a day bar stamped at the day's start, arriving at its
    /// close after the day's minutes; a minute bar after a fill stamped with the wall clock) counts as of
    /// the last one: figures are taken in the order they come, never dropped.
    pub fn on_equity(&mut self, now: DateTime<Utc>, equity: Decimal) -> Result<Option<KillSwitchState>, RiskError> {
        if self.tripped.is_some() {
            return Ok(None);
        }
        let now = self.last.as_ref().map_or(now, |l| now.max(l.at));
        let day = trading_day(now);
        let open = match &self.day_open {
            Some(d) if d.day == day => d.equity,
            _ => {
                // The previous session's close: the last figure of an earlier day; else this one.
                let d = match &self.last {
                    Some(l) if l.day < day => DayOpen { day, equity: l.equity, at: l.at },
                    _ => DayOpen { day, equity, at: now },
                };
                // A critical write: flushed before `insert` returns, or, inside the caller's group commit
                // (the engine's event), by that commit, with the event's order records and before any of
                // its orders goes out. No flush of its own here: on `1Day` every close opens a day.
                self.day_tree.insert(DAY_OPEN_KEY, &d)?;
                log::debug!("risk: trading day {day}: reference equity {} (as of {})", d.equity, d.at);
                let open = d.equity;
                self.day_open = Some(d);
                open
            }
        };
        let last = DayOpen { day, equity, at: now };
        self.last_tree.insert(LAST_EQUITY_KEY, &last)?;
        self.last = Some(last);
        if open <= Decimal::ZERO || open - equity < self.limit_pct * open {
            return Ok(None);
        }
        let loss_pct = (open - equity) / open;
        let state = KillSwitchState {
            tripped_at: now,
            reason: format!(
                "daily loss {:.2}% of the day's reference equity {} (the previous close) reached the limit {:.2}% (equity {})",
                loss_pct * Decimal::ONE_HUNDRED,
                crate::domain::money_dec(open),
                self.limit_pct * Decimal::ONE_HUNDRED,
                crate::domain::money_dec(equity)
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
        log::error!("risk: KILL SWITCH TRIPPED: {}; action {}", state.reason, action_name(state.action));
        self.tripped = Some(state.clone());
        Ok(Some(state))
    }

    /// Clears the switch as `clear` does on disk (`tradebot risk clear` beside the running daemon), and
    /// forgets it here too, with the day's reference and the last figure: the limit counts again from
    /// the next figure. Returns the state that was cleared.
    pub fn clear(&mut self, who: &str, now: DateTime<Utc>) -> Result<Option<KillSwitchState>, RiskError> {
        let was = clear(&self.store, who, now)?;
        self.tripped = None;
        self.day_open = None;
        self.last = None;
        Ok(was)
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
        log::error!("risk: KILL SWITCH TRIPPED: {reason}; action {}", action_name(state.action));
        self.tripped = Some(state.clone());
        Ok(state)
    }
}

/// How a log line names the action: `halt`, `flatten`.
pub(crate) fn action_name(a: KillSwitchAction) -> &'static str {
    match a {
        KillSwitchAction::Halt => "halt",
        KillSwitchAction::Flatten => "flatten",
    }
}

/// Reads the stored kill switch and day opening equity without taking over the tracker.
pub(crate) fn stored_state(store: &Store) -> Result<(Option<KillSwitchState>, Option<DayOpen>), RiskError> {
    let k: TypedTree<KillSwitchState> = store.tree(TreeName::Kv)?;
    let d: TypedTree<DayOpen> = store.tree(TreeName::Kv)?;
    Ok((k.get(KILL_SWITCH_KEY)?, d.get(DAY_OPEN_KEY)?))
}

/// Clears a tripped kill switch (and the day's reference and last equity, so the limit counts again from
/// the next figure), flushed; logs who cleared it and when.
/// Returns the state that was cleared, `None` when it was not tripped.
pub(crate) fn clear(store: &Store, who: &str, now: DateTime<Utc>) -> Result<Option<KillSwitchState>, RiskError> {
    let k: TypedTree<KillSwitchState> = store.tree(TreeName::Kv)?;
    let d: TypedTree<DayOpen> = store.tree(TreeName::Kv)?;
    let was = k.get(KILL_SWITCH_KEY)?;
    if was.is_some() {
        k.remove(KILL_SWITCH_KEY)?;
        d.remove(DAY_OPEN_KEY)?;
        store.tree::<DayOpen>(TreeName::Snapshot)?.remove(LAST_EQUITY_KEY)?;
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
