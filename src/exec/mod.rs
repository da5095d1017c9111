//! The execution rule for one asset: how an action in [-1, 1] becomes a fill, shared by the vectorized
//! environment, the simulated broker, the risk checks and the engine, so that training and trading cannot
//! disagree. [`weights`] is the other action space's rule: target weights, traded to a no-trade band's
//! edge, for the env's trades and the engine's orders alike.
//!
//! A step runs in two phases over all assets of an account: [`sell_phase`] (trailing stop, then the
//! requested sell) for every asset, then [`buy_phase`] for every asset, so sells free cash before buys.
//! Rules: a trade is `action * max_trade` units (truncated toward zero with integer units); a requested
//! trade below `min_order` units is dropped; a sell is capped at the holding; a buy is capped by cash
//! (after fees, unless FinRL's cap is asked for); fees and slippage are charged in basis points; a
//! trailing stop sells the whole holding when the price falls `trailing_stop` below the high-water mark
//! since entry, and the asset then takes no buys for `cooldown_bars` bars. Long-only.

use serde::{Deserialize, Serialize};

pub(crate) mod weights;

pub use weights::ActionSpace;

/// Parameters of the execution rule. Built from config; see `EnvConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExecParams {
    /// Units traded at |action| = 1 (FinRL's `hmax`).
    pub max_trade: f64,
    /// Requested trades of fewer units are dropped.
    pub min_order: f64,
    /// Fees in basis points of each trade's notional.
    pub fee_bps: f64,
    /// Slippage in basis points: buys fill this much above the close, sells below it.
    pub slippage_bps: f64,
    /// Fraction below the high-water mark that triggers a stop (0 = off), e.g. 0.1 for 10%.
    pub trailing_stop: f64,
    /// Bars after a stop-out during which the asset takes no buys.
    pub cooldown_bars: u32,
    /// Whole units only (quantities truncated toward zero).
    pub integer_units: bool,
    /// FinRL caps a buy at `floor(cash / price)`, fees not included (cash may then go slightly negative).
    pub cash_cap_ignores_fees: bool,
}

impl Default for ExecParams {
    fn default() -> Self {
        ExecParams {
            max_trade: 100.0,
            min_order: 1.0,
            fee_bps: 10.0,
            slippage_bps: 0.0,
            trailing_stop: 0.0,
            cooldown_bars: 0,
            integer_units: true,
            cash_cap_ignores_fees: false,
        }
    }
}

/// One asset's position in one account.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Position {
    pub holding: f64,
    /// Average entry price of the holding (0 when flat).
    pub entry: f64,
    /// Highest price since entry (0 when flat).
    pub high_water: f64,
    /// Buys are refused while this is above zero. Counted down at the start of each bar; a stop-out sets it
    /// to `cooldown_bars + 1`, so the stop bar and the next `cooldown_bars` bars take no buys.
    pub cooldown: u32,
}

/// What a phase did to one asset.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct AssetFill {
    /// Units bought (> 0) or sold (< 0).
    pub qty: f64,
    /// Notional at the execution price, before fees.
    pub notional: f64,
    pub fee: f64,
    pub stopped: bool,
}

impl ExecParams {
    fn fee_rate(&self) -> f64 {
        self.fee_bps * 1e-4
    }

    fn slip_rate(&self) -> f64 {
        self.slippage_bps * 1e-4
    }

    /// Units requested by an action (sign dropped), truncated to whole units when asked.
    pub fn units(&self, action: f64) -> f64 {
        let q = action.clamp(-1.0, 1.0).abs() * self.max_trade;
        if self.integer_units { q.trunc() } else { q }
    }
}

/// Stop check, then the requested sell (action < 0). Also starts the cooldown of a stopped asset and
/// counts down an active one. Returns the fill (qty ≤ 0).
#[inline]
pub(crate) fn sell_phase(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64, action: f64) -> AssetFill {
    let want = if action >= 0.0 { 0.0 } else { p.units(action) };
    sell_units_phase(p, pos, cash, price, want)
}

/// [`sell_phase`] for a sell of `want` units (≥ 0; 0 = none) sized by the caller (the weights action
/// space): stop check, cooldown count-down, then the sell, dropped below `min_order`, capped at the holding.
#[inline]
pub(crate) fn sell_units_phase(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64, want: f64) -> AssetFill {
    if pos.cooldown > 0 {
        pos.cooldown -= 1;
    }
    if pos.holding > 0.0 {
        pos.high_water = pos.high_water.max(price);
        if p.trailing_stop > 0.0 && price <= pos.high_water * (1.0 - p.trailing_stop) {
            let mut f = sell(p, pos, cash, price, pos.holding);
            pos.cooldown = p.cooldown_bars.saturating_add(1);
            f.stopped = true;
            return f;
        }
    }
    requested_sell(p, pos, cash, price, want)
}

#[inline]
fn requested_sell(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64, want: f64) -> AssetFill {
    if want < p.min_order || want <= 0.0 {
        return AssetFill::default();
    }
    sell(p, pos, cash, price, want.min(pos.holding))
}

#[inline]
fn sell(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64, qty: f64) -> AssetFill {
    if qty <= 0.0 {
        return AssetFill::default();
    }
    let px = price * (1.0 - p.slip_rate());
    let notional = px * qty;
    let fee = notional * p.fee_rate();
    *cash += notional - fee;
    pos.holding -= qty;
    if pos.holding <= 0.0 {
        *pos = Position { cooldown: pos.cooldown, ..Position::default() };
    }
    AssetFill { qty: -qty, notional, fee, stopped: false }
}

/// The requested buy (action > 0), unless the asset is cooling down after a stop-out. Returns the fill.
#[inline]
pub(crate) fn buy_phase(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64, action: f64) -> AssetFill {
    if action <= 0.0 {
        return AssetFill::default();
    }
    buy_units_phase(p, pos, cash, price, p.units(action))
}

/// [`buy_phase`] for a buy of `want` units (≥ 0; 0 = none) sized by the caller (the weights action space).
#[inline]
pub(crate) fn buy_units_phase(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64, want: f64) -> AssetFill {
    if pos.cooldown > 0 || want < p.min_order || want <= 0.0 {
        return AssetFill::default();
    }
    let px = price * (1.0 + p.slip_rate());
    let unit_cost = if p.cash_cap_ignores_fees { px } else { px * (1.0 + p.fee_rate()) };
    let mut affordable = (*cash / unit_cost).max(0.0);
    if p.integer_units {
        affordable = affordable.floor();
    }
    let qty = want.min(affordable);
    if qty <= 0.0 {
        return AssetFill::default();
    }
    let notional = px * qty;
    let fee = notional * p.fee_rate();
    let spent = notional + fee;
    // Rounding can leave a residue below zero under the after-fees cap; that cap promises cash ≥ 0.
    *cash = if p.cash_cap_ignores_fees { *cash - spent } else { (*cash - spent).max(0.0) };
    let held = pos.holding;
    pos.entry = if held > 0.0 { (pos.entry * held + px * qty) / (held + qty) } else { px };
    pos.high_water = if held > 0.0 { pos.high_water.max(price) } else { price };
    pos.holding = held + qty;
    AssetFill { qty, notional, fee, stopped: false }
}

/// The bar's phase when everything must go (FinRL's turbulence rule, the kill switch's flatten): counts
/// down the cooldown like [`sell_phase`], then sells the whole holding, with no stop check.
pub(crate) fn liquidate(p: &ExecParams, pos: &mut Position, cash: &mut f64, price: f64) -> AssetFill {
    if pos.cooldown > 0 {
        pos.cooldown -= 1;
    }
    sell(p, pos, cash, price, pos.holding)
}

#[cfg(test)]
mod tests;
