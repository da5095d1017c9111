//! `Refusal`: why the risk checks refused an order. Each variant has a stable `reason()` code (metrics
//! count rejects by it; never rename one) and a Display that says what was wrong with which numbers
//! (money to the cent).

use crate::domain::{Side, Symbol};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("kill switch tripped at {tripped_at} ({why}): no new orders until `tradebot risk clear`")]
    KillSwitch { tripped_at: DateTime<Utc>, why: String },
    #[error("{symbol}: an input is NaN or infinite ({what}); no trade on it")]
    NonFinite { symbol: Symbol, what: String },
    #[error("{symbol}: the bar closing at {bar_time} is {age_secs} s old at {now}, above the limit of {max_secs} s")]
    StaleBar { symbol: Symbol, bar_time: DateTime<Utc>, now: DateTime<Utc>, age_secs: i64, max_secs: u64 },
    #[error("{symbol}: the stock market is closed at {now} ({session} hours, America/New_York)")]
    MarketClosed { symbol: Symbol, now: DateTime<Utc>, session: &'static str },
    #[error("{symbol} is not tradable at the broker")]
    NotTradable { symbol: Symbol },
    #[error("{symbol} is not fractionable: quantity {qty} must be a whole number (size whole units)")]
    NotFractionable { symbol: Symbol, qty: Decimal },
    #[error("{symbol}: quantity {qty} is below the minimum order size {min}")]
    BelowMinimum { symbol: Symbol, qty: Decimal, min: Decimal },
    #[error("{symbol}: quantity {qty} is not a whole number of the broker's quantity increment {increment}")]
    QtyIncrement { symbol: Symbol, qty: Decimal, increment: Decimal },
    #[error("{symbol}: order value {notional:.2} is below the broker's crypto minimum of {min:.2}")]
    BelowMinNotional { symbol: Symbol, notional: Decimal, min: Decimal },
    #[error("{symbol}: in cooldown after a trailing stop ({bars_left} more bars take no buys)")]
    Cooldown { symbol: Symbol, bars_left: u32 },
    #[error("{symbol}: order notional {notional:.2} is above risk.max_order_notional = {cap:.2}")]
    OrderNotional { symbol: Symbol, notional: Decimal, cap: Decimal },
    #[error("{symbol}: position would be worth {value:.2}, above risk.max_position_pct of equity ({cap:.2})")]
    PositionLimit { symbol: Symbol, value: Decimal, cap: Decimal },
    #[error("{symbol}: gross exposure would be {gross:.2}, above risk.max_gross_exposure_pct of equity ({cap:.2})")]
    GrossExposure { symbol: Symbol, gross: Decimal, cap: Decimal },
    #[error("{symbol}: buy of {notional:.2} needs more cash than the {cash:.2} available")]
    InsufficientCash { symbol: Symbol, notional: Decimal, cash: Decimal },
    #[error("equity is {equity:.2}: no buys while it is not above zero")]
    NoEquity { equity: Decimal },
    #[error("{symbol}: {side} of {qty} with {held} held would open a short position (long-only)")]
    WouldShort { symbol: Symbol, side: Side, qty: Decimal, held: Decimal },
}

impl Refusal {
    /// Stable machine code, e.g. for a `rejects{reason="stale_bar"}` counter.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::KillSwitch { .. } => "kill_switch",
            Refusal::NonFinite { .. } => "non_finite",
            Refusal::StaleBar { .. } => "stale_bar",
            Refusal::MarketClosed { .. } => "market_closed",
            Refusal::NotTradable { .. } => "not_tradable",
            Refusal::NotFractionable { .. } => "not_fractionable",
            Refusal::BelowMinimum { .. } => "below_min_order",
            Refusal::QtyIncrement { .. } => "qty_increment",
            Refusal::BelowMinNotional { .. } => "below_min_notional",
            Refusal::Cooldown { .. } => "cooldown",
            Refusal::OrderNotional { .. } => "max_order_notional",
            Refusal::PositionLimit { .. } => "max_position",
            Refusal::GrossExposure { .. } => "max_gross_exposure",
            Refusal::InsufficientCash { .. } => "insufficient_cash",
            Refusal::NoEquity { .. } => "no_equity",
            Refusal::WouldShort { .. } => "would_short",
        }
    }

    /// Every reason code, for metrics that pre-register their labels.
    pub const REASONS: [&'static str; 16] = [
        "kill_switch",
        "non_finite",
        "stale_bar",
        "market_closed",
        "not_tradable",
        "not_fractionable",
        "below_min_order",
        "qty_increment",
        "below_min_notional",
        "cooldown",
        "max_order_notional",
        "max_position",
        "max_gross_exposure",
        "insufficient_cash",
        "no_equity",
        "would_short",
    ];
}
