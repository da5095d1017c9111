//! Risk: the checks every order passes before any broker sees it. Approval is a type: a broker only takes
//! a `RiskApproved<OrderRequest>`, and only this module can build one (the field is private and the
//! constructor is visible to `risk` alone).
//!
//! ```text
//!  RiskChecks::open(&RiskConfig, &ExecParams, &Store)   loads the kill switch (stays tripped until cleared)
//!  on_bar(symbol, close)      -> Option<StopOut>        trailing stop / cooldown (the crate::exec rule)
//!  on_fill(symbol, side, ..)                            keeps the stop's holding in step
//!  on_equity(now, equity)     -> Option<KillSwitchState> daily loss limit; trips, persists, flushes
//!  check(OrderRequest, &RiskContext) -> Result<RiskApproved<OrderRequest>, Refusal>
//! ```
//!
//! - `checks`: `RiskChecks` and the order of its checks; `context`: what a check looks at;
//!   `refusal`: `Refusal` with stable reason codes; `hours`: market hours and the trading day;
//!   `stops`: trailing stops and cooldown; `kill`: the daily loss limit and the persisted kill switch;
//!   `notional`: the single notional cap the scripted order-path harness uses; `asset_rules`: Alpaca's
//!   order rules per asset class (time in force, crypto quantity increments and $1 minimum).

mod asset_rules;
mod checks;
mod context;
pub(crate) mod hours;
mod kill;
mod notional;
mod refusal;
mod stops;
#[cfg(test)]
mod tests;

pub(crate) use asset_rules::{CRYPTO_MIN_NOTIONAL, is_crypto, order_qty, tif_for};
pub(crate) use checks::{Limits, RiskChecks};
pub(crate) use context::{AssetRules, Holding, RiskContext};
pub use kill::DailyLoss;
pub(crate) use kill::{DayOpen, KillSwitchState, RiskError, action_name, clear as clear_kill_switch, stored_state};
pub(crate) use notional::{approve_notional, approve_reducing_sell};
pub(crate) use refusal::Refusal;
pub(crate) use stops::StopOut;
#[cfg(test)]
pub(crate) use stops::StopTracker;

/// A value the risk checks let through. Built only inside `crate::risk`.
#[derive(Debug, Clone, PartialEq)]
pub struct RiskApproved<T>(T);

impl<T> RiskApproved<T> {
    /// Only the risk module approves.
    pub(in crate::risk) fn new(inner: T) -> Self {
        RiskApproved(inner)
    }

    pub fn get(&self) -> &T {
        &self.0
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for RiskApproved<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// For unit tests elsewhere in the crate (the OMS, brokers) that need an approved order without running
/// the checks. Not compiled into the binary.
#[cfg(test)]
#[allow(dead_code)]
pub(crate) fn approve_for_test<T>(inner: T) -> RiskApproved<T> {
    RiskApproved::new(inner)
}
