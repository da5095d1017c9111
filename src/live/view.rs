//! What the trading thread shows of the engine, taken between two events from its memory (no disk): the
//! `EngineView` the status, the dashboard and the alerts read, and the `TradingView` the live trading
//! thread leaves for the daemon's chores after each event.

use crate::control::report::{OrderStatusLine, StaleSymbol};
use crate::domain::Symbol;
use crate::engine::Engine;
use crate::oms::OmsOrder;
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;

/// The account's equity and cash as the driver knows them: the simulated broker's, or the engine's view
/// of Alpaca's.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Balance {
    pub equity: f64,
    pub cash: f64,
}

/// What the status report needs of the engine, taken between two events from its memory (no disk).
#[derive(Debug, Clone, Default)]
pub(crate) struct EngineView {
    pub account: Balance,
    pub positions: Vec<(Symbol, rust_decimal::Decimal)>,
    pub closes: Vec<(Symbol, f64)>,
    pub open_orders: Vec<crate::control::report::OrderStatusLine>,
    pub policy_id: Option<String>,
    pub probs_id: Option<String>,
    pub missing_model: Option<&'static str>,
    pub paused: bool,
    pub kill_reason: Option<String>,
    pub stale: Vec<StaleSymbol>,
    /// The last flatten asked for by a person.
    pub flatten: Option<crate::control::report::FlattenStatus>,
    /// Protective sells that could not go out (a count that only grows; the host alerts on each).
    pub protect_failures: crate::engine::ProtectFailures,
}

impl EngineView {
    pub(crate) fn of(engine: &Engine, account: Balance) -> Self {
        EngineView {
            account,
            positions: engine.oms().positions().into_iter().collect(),
            closes: engine.last_closes(),
            open_orders: engine.oms().open_orders().map(order_line).collect(),
            policy_id: engine.policy_id().map(str::to_string),
            probs_id: engine.probs_id(),
            missing_model: engine.missing_model(),
            paused: engine.is_paused(),
            kill_reason: engine.risk().and_then(|r| r.kill_switch()).map(|k| k.reason.clone()),
            stale: engine
                .stale_symbols()
                .into_iter()
                .map(|(s, bars, down)| StaleSymbol { symbol: s.to_string(), bars, down })
                .collect(),
            flatten: engine.flatten_outcome().map(|o| crate::control::report::FlattenStatus {
                seq: o.seq,
                at: Some(o.at),
                sent: o.sent.iter().map(|s| s.to_string()).collect(),
                unconfirmed: o.unconfirmed.iter().map(|(s, _)| s.to_string()).collect(),
                waiting: o.waiting.iter().map(|s| s.to_string()).collect(),
                failed: o.failed.iter().map(|(s, why)| format!("{s}: {why}")).collect(),
            }),
            protect_failures: engine.protect_failures().clone(),
        }
    }
}

/// What the trading thread leaves for the chores after each event.
#[derive(Debug, Clone, Default)]
pub(crate) struct TradingView {
    pub engine: EngineView,
    /// The first reconciliation is done: the engine trades.
    pub ready: bool,
    pub bars_received: u64,
    pub last_bar: BTreeMap<String, DateTime<Utc>>,
}

/// One order as the status lists it.
pub(crate) fn order_line(o: &OmsOrder) -> OrderStatusLine {
    OrderStatusLine {
        client_order_id: o.client_order_id.to_string(),
        symbol: o.symbol.to_string(),
        side: o.side.to_string(),
        qty: o.qty.and_then(|q| q.to_f64()).unwrap_or(f64::NAN),
        status: o.status.to_string(),
    }
}
