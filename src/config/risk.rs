//! The `[broker]` and `[risk]` sections: where orders go and the limits every order passes.

use super::raw::{RawBroker, RawRisk};
use super::{BrokerKind, Checker, KillSwitchAction, Mode, ser_secs};
use crate::domain::Timeframe;
use rust_decimal::Decimal;
use serde::Serialize;
use std::time::Duration;

const DAY: u64 = 86_400;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BrokerConfig {
    pub kind: BrokerKind,
    pub initial_cash: Decimal,
    pub fee_bps: f64,
    pub slippage_bps: f64,
    /// At shutdown, cancel the orders still open at the broker (false: keep them; the OMS reconciles them
    /// at the next start).
    pub cancel_on_shutdown: bool,
    /// An order sent that the broker still does not know this long after its send attempt is "lost"
    /// (`oms::OmsConfig::lost_after`).
    #[serde(serialize_with = "ser_secs")]
    pub lost_after: Duration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskConfig {
    pub max_position_pct: f64,
    pub max_gross_exposure_pct: f64,
    pub max_order_notional: Decimal,
    pub daily_loss_limit_pct: f64,
    pub kill_switch: KillSwitchAction,
    #[serde(serialize_with = "ser_secs")]
    pub max_bar_age: Duration,
    /// Stock orders outside regular hours (09:30-16:00 America/New_York) are allowed from 04:00 to 20:00.
    pub extended_hours: bool,
    /// Orders of one symbol and side that may work at once (1: a bar adds no buy on an unfilled buy).
    pub max_working_orders: usize,
}

impl Checker {
    pub(super) fn broker(&mut self, b: RawBroker, mode: Mode) -> BrokerConfig {
        let broker = BrokerConfig {
            kind: self.choice(
                "broker.kind",
                b.kind.as_deref(),
                "sim",
                &[("sim", BrokerKind::Sim), ("alpaca", BrokerKind::Alpaca)],
            ),
            initial_cash: self.positive_decimal("broker.initial_cash", b.initial_cash.as_deref(), "100000"),
            fee_bps: self.range("broker.fee_bps", b.fee_bps, 0.0, (0.0, true), (1000.0, true)),
            slippage_bps: self.range("broker.slippage_bps", b.slippage_bps, 0.0, (0.0, true), (1000.0, true)),
            cancel_on_shutdown: b.cancel_on_shutdown.unwrap_or(false),
            lost_after: Duration::from_secs_f64(self.range(
                "broker.lost_after_secs",
                b.lost_after_secs,
                60.0,
                (1.0, true),
                (3600.0, true),
            )),
        };
        if mode == Mode::Live && broker.kind != BrokerKind::Alpaca {
            self.problem(
                "mode = \"live\" needs broker.kind = \"alpaca\": the simulated broker cannot trade real money".into(),
            );
        }
        broker
    }

    pub(super) fn risk(&mut self, r: RawRisk, timeframe: Timeframe, mode: Mode) -> RiskConfig {
        let bar = timeframe.seconds().max(60).unsigned_abs();
        // Live trading: a week, or two bars of a longer timeframe. Paper trading also runs against fakes
        // that stream historic bars (years old): ten years there. Either way the check stays on.
        let max_age = match mode {
            Mode::Live => (7 * DAY).max(2 * bar),
            Mode::Paper => 3650 * DAY,
        };
        RiskConfig {
            max_position_pct: self.range("risk.max_position_pct", r.max_position_pct, 0.25, (0.0, false), (1.0, true)),
            max_gross_exposure_pct: self.range(
                "risk.max_gross_exposure_pct",
                r.max_gross_exposure_pct,
                1.0,
                (0.0, false),
                (4.0, true),
            ),
            max_order_notional: self.positive_decimal(
                "risk.max_order_notional",
                r.max_order_notional.as_deref(),
                "50000",
            ),
            daily_loss_limit_pct: self.range(
                "risk.daily_loss_limit_pct",
                r.daily_loss_limit_pct,
                0.05,
                (0.0, false),
                (1.0, true),
            ),
            kill_switch: self.choice(
                "risk.kill_switch",
                r.kill_switch.as_deref(),
                "halt",
                &[("halt", KillSwitchAction::Halt), ("flatten", KillSwitchAction::Flatten)],
            ),
            max_bar_age: match r.max_bar_age_secs {
                Some(0) => {
                    self.problem("risk.max_bar_age_secs = 0: must be at least 1".into());
                    Duration::from_secs(1)
                }
                Some(s) if s > max_age => {
                    self.problem(format!(
                        "risk.max_bar_age_secs = {s}: at most {max_age} in {} mode ({} days): a bar older than that is \
                         stale, and a larger value turns the stale check off; omit it for two bars ({} s)",
                        if mode == Mode::Live { "live" } else { "paper" },
                        max_age / DAY,
                        2 * bar
                    ));
                    Duration::from_secs(2 * bar)
                }
                Some(s) => Duration::from_secs(s),
                None => Duration::from_secs(2 * bar),
            },
            extended_hours: r.extended_hours.unwrap_or(false),
            max_working_orders: match r.max_working_orders {
                None => 1,
                Some(n @ 1..=20) => n as usize,
                Some(n) => {
                    self.problem(format!("risk.max_working_orders = {n}: use 1 to 20 orders per symbol and side"));
                    1
                }
            },
        }
    }
}
