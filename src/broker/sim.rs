//! The simulated broker: cash and positions of one local account, filled bar by bar with the shared
//! execution rule of `exec` (stop checks and sells before buys, sells capped at the holding, buys
//! capped by cash after fees, minimum order size, fee and slippage in basis points, trailing stop,
//! cooldown after a stop-out).
//!
//! The rule is shared exactly, not re-implemented: the rule sizes a trade as `|action| × max_trade` with
//! the action clamped to [-1, 1], so the broker runs it with `max_trade` set to the order's quantity and
//! an action of ±1, which gives the same quantity bit for bit (`1 × q = q`). A property test drives the
//! broker and the environment with the same random actions and compares cash, holdings and equity at every
//! bar.
//!
//! As a broker (`orders`: `queue` or `Broker::submit`, then `fill_pending` at the next bar) it takes day
//! market orders decided on one bar and fills them at the next bar's close, reporting each order filled (in
//! part, the rest canceled) or canceled when the rule dropped it, as the backtest and the replay trade.

use crate::domain::{BrokerOrder, OrderRequest, Side, Symbol};
use crate::exec::{self, ExecParams, Position};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

mod orders;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SimError {
    #[error("no price for {0} yet: an order can only fill against a bar of its symbol")]
    NoPrice(Symbol),
    #[error("price of {symbol} is {price}: must be finite and above zero")]
    BadPrice { symbol: Symbol, price: f64 },
    #[error("order quantity {0} must be finite and above zero")]
    BadQty(f64),
}

/// An order to the simulated broker: a market order for `qty` units, filled at the bar's price.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SimOrder {
    pub symbol: Symbol,
    pub side: Side,
    pub qty: f64,
}

/// What happened to one symbol in one bar.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SimFill {
    pub symbol: Symbol,
    /// Units bought (> 0) or sold (< 0); 0 when the rule dropped the order.
    pub qty: f64,
    pub price: f64,
    pub notional: f64,
    pub fee: f64,
    /// The fill was a trailing-stop exit, not a requested order.
    pub stopped: bool,
}

pub(crate) struct SimBroker {
    params: ExecParams,
    cash: f64,
    positions: BTreeMap<Symbol, Position>,
    prices: BTreeMap<Symbol, f64>,
    /// Orders taken (`queue`, `Broker::submit`) and not yet filled: they fill at the next `fill_pending`.
    pending: Vec<OrderRequest>,
    /// The orders the last `fill_pending` closed, as a broker reports them (for `Broker::snapshot`).
    closed: Vec<BrokerOrder>,
    /// The time of the last `fill_pending`.
    at: Option<DateTime<Utc>>,
}

impl SimBroker {
    /// `exec.max_trade` is ignored: orders carry their own quantities.
    pub(crate) fn new(initial_cash: f64, exec: ExecParams) -> Self {
        SimBroker {
            params: exec,
            cash: initial_cash,
            positions: BTreeMap::new(),
            prices: BTreeMap::new(),
            pending: Vec::new(),
            closed: Vec::new(),
            at: None,
        }
    }

    /// The rule's parameters and action for an order of `qty` units (0: none) in direction `sign`.
    fn sized(&self, qty: f64, sign: f64) -> (ExecParams, f64) {
        (ExecParams { max_trade: qty, ..self.params }, if qty > 0.0 { sign } else { 0.0 })
    }

    pub(crate) fn cash(&self) -> f64 {
        self.cash
    }

    #[cfg(test)]
    pub(crate) fn holding(&self, symbol: &Symbol) -> f64 {
        self.positions.get(symbol).map(|p| p.holding).unwrap_or(0.0)
    }

    #[cfg(test)]
    pub(crate) fn position(&self, symbol: &Symbol) -> Option<&Position> {
        self.positions.get(symbol)
    }

    /// Cash plus every holding at its last price.
    pub(crate) fn equity(&self) -> f64 {
        let mut e = self.cash;
        for (s, p) in &self.positions {
            e += p.holding * self.prices.get(s).copied().unwrap_or(0.0);
        }
        e
    }

    /// One bar: new prices for `bars` (every symbol the account trades at this time), then the orders.
    /// Every symbol with a price gets its stop check and cooldown countdown, as in the environment; the
    /// sells of all symbols execute before any buy. Orders for the same symbol and side add up.
    pub(crate) fn step(&mut self, bars: &[(Symbol, f64)], orders: &[SimOrder]) -> Result<Vec<SimFill>, SimError> {
        for (symbol, price) in bars {
            if !(price.is_finite() && *price > 0.0) {
                return Err(SimError::BadPrice { symbol: symbol.clone(), price: *price });
            }
        }
        for o in orders {
            if !(o.qty.is_finite() && o.qty > 0.0) {
                return Err(SimError::BadQty(o.qty));
            }
            if !bars.iter().any(|(s, _)| s == &o.symbol) {
                return Err(SimError::NoPrice(o.symbol.clone()));
            }
        }
        for (symbol, price) in bars {
            self.prices.insert(symbol.clone(), *price);
        }
        let wanted = |symbol: &Symbol, side: Side| -> f64 {
            orders.iter().filter(|o| &o.symbol == symbol && o.side == side).map(|o| o.qty).sum()
        };
        let mut fills = Vec::new();
        for (symbol, price) in bars {
            let (params, action) = self.sized(wanted(symbol, Side::Sell), -1.0);
            let pos = self.positions.entry(symbol.clone()).or_default();
            let f = exec::sell_phase(&params, pos, &mut self.cash, *price, action);
            fills.push(SimFill {
                symbol: symbol.clone(),
                qty: f.qty,
                price: *price,
                notional: f.notional,
                fee: f.fee,
                stopped: f.stopped,
            });
        }
        for (i, (symbol, price)) in bars.iter().enumerate() {
            let (params, action) = self.sized(wanted(symbol, Side::Buy), 1.0);
            let pos = self.positions.entry(symbol.clone()).or_default();
            let f = exec::buy_phase(&params, pos, &mut self.cash, *price, action);
            if f.qty != 0.0 {
                fills[i] = SimFill {
                    symbol: symbol.clone(),
                    qty: fills[i].qty + f.qty,
                    price: *price,
                    notional: fills[i].notional + f.notional,
                    fee: fills[i].fee + f.fee,
                    stopped: fills[i].stopped,
                };
            }
        }
        fills.retain(|f| f.qty != 0.0);
        Ok(fills)
    }
}

#[cfg(test)]
mod tests;
