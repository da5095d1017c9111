//! `RiskChecks`: every check an order passes before any broker sees it, built from `RiskConfig`, the
//! execution rule's stop settings and the `Store` (for the kill switch). Synchronous; no I/O except the
//! flush when the kill switch trips.
//!
//! Order of the checks in `check`:
//! 1. kill switch: when tripped nothing passes, except, under `kill_switch = "flatten"`, sells that reduce
//!    a long position (the flatten itself);
//! 2. NaN or infinite inputs (the decision's features or outputs, the order's price, a held symbol's
//!    price): refused, with an error logged;
//! 3. a sell larger than the holding would open a short: refused (long-only);
//! 4. the asset: tradable; fractionable, or else the quantity must be whole (**refused, not rounded**: the
//!    approved order is always the order decided, so the decision record stays true; strategies size whole
//!    units for such assets); at least the broker's minimum order size; whole steps of its quantity
//!    increment, and for crypto at least $1 (`asset_rules`);
//! 5. stale data: the bar closed more than `max_bar_age` before now (not for a protective sell that reduces
//!    a holding: a stop, the kill switch's or a person's flatten);
//! 6. market hours for stocks on intraday bars (see `hours`);
//! 7. a sell that reduces a position passes here: **exposure checks never block a risk-reducing sell**;
//! 8. buys: cooldown after a trailing stop, equity above zero, order notional, position per symbol as a
//!    fraction of equity, gross exposure as a fraction of equity, and cash (unless the gross limit allows
//!    leverage, i.e. `max_gross_exposure_pct > 1`).

use super::context::{Holding, RiskContext, dec};
use super::hours::{Session, hours_apply};
use super::kill::{DailyLoss, KillSwitchState, RiskError};
use super::stops::{StopOut, StopTracker};
use super::{Refusal, RiskApproved};
use crate::calendar::Calendar;
use crate::config::{KillSwitchAction, RiskConfig};
use crate::domain::{OrderRequest, Side, Symbol};
use crate::exec::ExecParams;
use crate::store::Store;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::time::Duration;

/// The configured limits, as decimals.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub max_position_pct: Decimal,
    pub max_gross_exposure_pct: Decimal,
    pub max_order_notional: Decimal,
    pub max_bar_age: Duration,
    pub session: Session,
    /// Orders of one symbol and side that may work at once (`risk.max_working_orders`).
    pub max_working: usize,
}

impl Limits {
    pub fn from_config(cfg: &RiskConfig) -> Self {
        Limits {
            max_position_pct: dec(cfg.max_position_pct).unwrap_or(Decimal::ZERO),
            max_gross_exposure_pct: dec(cfg.max_gross_exposure_pct).unwrap_or(Decimal::ZERO),
            max_order_notional: cfg.max_order_notional,
            max_bar_age: cfg.max_bar_age,
            session: if cfg.extended_hours { Session::Extended } else { Session::Regular },
            max_working: cfg.max_working_orders,
        }
    }
}

pub struct RiskChecks {
    limits: Limits,
    loss: DailyLoss,
    stops: StopTracker,
    /// Trading days and session times for the hours check (the shipped table until the daemon sets
    /// Alpaca's).
    calendar: Calendar,
}

impl RiskChecks {
    /// Loads the kill switch from the store (a tripped one stays tripped); trailing stop and cooldown come
    /// from the execution rule's parameters (`env.trailing_stop_pct`, `env.cooldown_bars`).
    pub fn open(cfg: &RiskConfig, exec: &ExecParams, store: &Store) -> Result<Self, RiskError> {
        Ok(RiskChecks {
            limits: Limits::from_config(cfg),
            loss: DailyLoss::open(store, cfg.daily_loss_limit_pct, cfg.kill_switch)?,
            stops: StopTracker::new(exec.trailing_stop, exec.cooldown_bars),
            calendar: Calendar::shipped(),
        })
    }

    /// The exchange calendar the hours check uses (Alpaca's, read by the daemon at start).
    pub fn set_calendar(&mut self, calendar: Calendar) {
        self.calendar = calendar;
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// New limits from a reloaded config (SIGHUP); the kill switch and the stops keep their state.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The tripped kill switch, if it is.
    pub fn kill_switch(&self) -> Option<&KillSwitchState> {
        self.loss.tripped()
    }

    /// A new equity figure: the daily loss limit. Returns the state when this call tripped the switch
    /// (already on disk); with `flatten` the engine then sells every holding (those sells pass `check`).
    pub fn on_equity(&mut self, now: DateTime<Utc>, equity: Decimal) -> Result<Option<KillSwitchState>, RiskError> {
        self.loss.on_equity(now, equity)
    }

    /// Clears a tripped kill switch (on disk and here): `DailyLoss::clear`.
    pub fn clear_kill(&mut self, who: &str, now: DateTime<Utc>) -> Result<Option<KillSwitchState>, RiskError> {
        self.loss.clear(who, now)
    }

    /// Trips the kill switch by hand, persisted.
    pub fn trip(&mut self, now: DateTime<Utc>, reason: &str, equity: Decimal) -> Result<KillSwitchState, RiskError> {
        self.loss.trip(now, reason, equity)
    }

    /// What the kill switch asks to sell now: every long holding when it is tripped with `flatten`,
    /// nothing otherwise. The engine turns each into a sell order, which `check` lets through.
    pub fn flatten_plan(&self, positions: &BTreeMap<Symbol, Holding>) -> Vec<(Symbol, Decimal)> {
        match self.loss.tripped() {
            Some(k) if k.action == KillSwitchAction::Flatten => {
                positions.iter().filter(|(_, h)| h.qty > Decimal::ZERO).map(|(s, h)| (s.clone(), h.qty)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// A closed bar: trailing stop and cooldown (call once per symbol and bar, before that bar's orders).
    pub fn on_bar(&mut self, symbol: &Symbol, close: f64) -> Option<StopOut> {
        self.stops.on_bar(symbol, close)
    }

    /// A broker fill, to keep the trailing stop's holding and entry in step.
    pub fn on_fill(&mut self, symbol: &Symbol, side: Side, qty: f64, price: f64) {
        self.stops.on_fill(symbol, side, qty, price)
    }

    pub fn stops(&self) -> &StopTracker {
        &self.stops
    }

    pub fn stops_mut(&mut self) -> &mut StopTracker {
        &mut self.stops
    }

    /// Runs every check (see the module docs); the approved order is `req` unchanged.
    pub fn check(&self, req: OrderRequest, ctx: &RiskContext<'_>) -> Result<RiskApproved<OrderRequest>, Refusal> {
        let sym = req.symbol.clone();
        let qty = req.qty.get();
        let held = ctx.held(&sym);
        let reducing = req.side == Side::Sell && qty <= held;
        // A tripped kill switch refuses everything but position-reducing sells (stops, a flatten), under
        // `halt` as under `flatten`.
        if let Some(k) = self.loss.tripped()
            && !reducing
        {
            return Err(Refusal::KillSwitch { tripped_at: k.tripped_at, why: k.reason.clone() });
        }
        let price = finite_inputs(&req, ctx).inspect_err(|e| log::error!("risk: {e}"))?;
        if req.side == Side::Sell && !reducing {
            return Err(Refusal::WouldShort { symbol: sym, side: req.side, qty, held });
        }
        let rules = ctx.rules(&sym);
        if !rules.tradable {
            return Err(Refusal::NotTradable { symbol: sym });
        }
        if !rules.fractionable && !qty.fract().is_zero() {
            return Err(Refusal::NotFractionable { symbol: sym, qty });
        }
        if let Some(min) = rules.min_order_size
            && qty < min
        {
            return Err(Refusal::BelowMinimum { symbol: sym, qty, min });
        }
        super::asset_rules::check(&sym, qty, price, &rules)?;
        // Stale data is for the model's entries: a protective sell (stop, kill switch, flatten) that
        // reduces a holding always goes out, priced from the freshest price there is.
        if !(reducing && req.why.is_protective()) {
            self.fresh(&sym, ctx)?;
        }
        if !rules.crypto && hours_apply(ctx.timeframe) && !self.calendar.is_open(ctx.now, self.limits.session) {
            return Err(Refusal::MarketClosed { symbol: sym, now: ctx.now, session: self.limits.session.name() });
        }
        if req.side == Side::Buy {
            self.buy_limits(&sym, qty, held, price, ctx)?;
        }
        Ok(RiskApproved::new(req))
    }

    fn fresh(&self, sym: &Symbol, ctx: &RiskContext<'_>) -> Result<(), Refusal> {
        let age = ctx.now - ctx.bar_time;
        let max = chrono::Duration::from_std(self.limits.max_bar_age).unwrap_or(chrono::Duration::MAX);
        if age > max {
            return Err(Refusal::StaleBar {
                symbol: sym.clone(),
                bar_time: ctx.bar_time,
                now: ctx.now,
                age_secs: age.num_seconds(),
                max_secs: self.limits.max_bar_age.as_secs(),
            });
        }
        Ok(())
    }

    fn buy_limits(
        &self,
        sym: &Symbol,
        qty: Decimal,
        held: Decimal,
        price: Decimal,
        ctx: &RiskContext<'_>,
    ) -> Result<(), Refusal> {
        let bars_left = self.stops.cooldown(sym);
        if bars_left > 0 {
            return Err(Refusal::Cooldown { symbol: sym.clone(), bars_left });
        }
        if ctx.equity <= Decimal::ZERO {
            return Err(Refusal::NoEquity { equity: ctx.equity });
        }
        let l = &self.limits;
        let notional = qty * price;
        if notional > l.max_order_notional {
            return Err(Refusal::OrderNotional { symbol: sym.clone(), notional, cap: l.max_order_notional });
        }
        let value = (held + qty).abs() * price;
        let cap = l.max_position_pct * ctx.equity;
        if value > cap {
            return Err(Refusal::PositionLimit { symbol: sym.clone(), value, cap });
        }
        let others: Decimal = ctx
            .positions
            .iter()
            .filter(|(s, _)| *s != sym)
            .map(|(_, h)| h.qty.abs() * dec(h.price).unwrap_or(Decimal::ZERO))
            .sum();
        let gross = others + value;
        let cap = l.max_gross_exposure_pct * ctx.equity;
        if gross > cap {
            return Err(Refusal::GrossExposure { symbol: sym.clone(), gross, cap });
        }
        if l.max_gross_exposure_pct <= Decimal::ONE && notional > ctx.cash {
            return Err(Refusal::InsufficientCash { symbol: sym.clone(), notional, cash: ctx.cash });
        }
        Ok(())
    }
}

/// The order's price as a decimal, after checking every input the checks use is finite.
fn finite_inputs(req: &OrderRequest, ctx: &RiskContext<'_>) -> Result<Decimal, Refusal> {
    let bad = |what: String| Refusal::NonFinite { symbol: req.symbol.clone(), what };
    if !ctx.inputs_finite {
        return Err(bad("the decision's features or model outputs".into()));
    }
    let price = dec(req.ref_price)
        .filter(|p| *p > Decimal::ZERO)
        .ok_or_else(|| bad(format!("order price {}", req.ref_price)))?;
    if req.side == Side::Buy
        && let Some((s, h)) = ctx.positions.iter().find(|(_, h)| dec(h.price).is_none())
    {
        return Err(bad(format!("last price {} of held {s}", h.price)));
    }
    Ok(price)
}
