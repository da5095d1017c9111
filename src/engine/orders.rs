//! From a wanted trade to the order manager: sizing to a valid quantity, the one-working-order rule, the
//! risk checks (with working orders counted), client order ids, and the stored decision record.
//! Protective sells (stops, the kill switch, flatten) are `protect`'s.

use super::Command;
use super::core::Engine;
use super::record::DecisionRecord;
use super::strategy::Want;
use crate::domain::{ClientOrderId, OrderRequest, OrderWhy, Qty, Symbol};
use crate::oms::{Oms, OmsError};
use crate::risk::{RiskContext, approve_notional};
use crate::store::keys::time_key;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use std::collections::BTreeMap;

impl Engine {
    pub(super) fn order(
        &mut self,
        k: usize,
        w: Want,
        t: DateTime<Utc>,
        price: f64,
        rec: &mut DecisionRecord,
    ) -> Vec<Command> {
        let symbol = self.cfg.symbols[k].clone();
        // Alpaca takes at most 9 decimal places, and crypto in whole steps of the pair's increment:
        // rounded down before risk sees it, so the approved order is the order sent.
        let assets = self.risk.as_ref().map(|r| &r.assets);
        let Ok(qty) = Qty::from_f64(w.qty).and_then(|q| Qty::new(crate::risk::order_qty(&symbol, assets, q.get())))
        else {
            log::warn!("engine: {symbol}: quantity {} is not a valid order size", w.qty);
            return Vec::new();
        };
        if self.gapped[k] || self.stale[k] > 0 {
            let code = if self.gapped[k] { "price_gap" } else { "stale" };
            self.refusals.push((symbol.clone(), code));
            rec.note = Some(format!("{symbol} {}: refused: {code}", w.side));
            return Vec::new();
        }
        // At most `risk.max_working_orders` (1) working orders per symbol and side: a bar does not add a
        // buy on an unfilled buy. Said at DEBUG: it repeats on every bar until the order ends (the refusal
        // is counted and stored with the decision).
        let max_working = self.risk.as_ref().map_or(1, |r| r.checks.limits().max_working);
        if super::account::working_count(&self.oms, &symbol, w.side) >= max_working {
            let code = "working_order";
            log::debug!("engine: {symbol} {}: {max_working} order(s) of that side still working; none added", w.side);
            self.refusals.push((symbol.clone(), code));
            rec.note = Some(format!("{symbol} {}: refused: {code}", w.side));
            return Vec::new();
        }
        let req = OrderRequest {
            client_order_id: ClientOrderId::derive(&self.cfg.strategy.name, &symbol, t, k as u16),
            symbol: symbol.clone(),
            side: w.side,
            qty,
            tif: crate::risk::tif_for(&symbol, self.risk.as_ref().map(|r| &r.assets)),
            bar_time: t,
            ref_price: price,
            why: OrderWhy::Model,
        };
        let approved = match self.approve(req) {
            Ok(a) => a,
            Err((code, e)) => {
                // At INFO when a refusal of this symbol for this reason begins (`refusals`), else DEBUG.
                match super::refusals::level(symbol.as_str(), code, self.clock.now()) {
                    log::Level::Info => {
                        log::info!("engine: risk refused: {e} (again today for {symbol} and {code}: at debug)")
                    }
                    level => log::log!(level, "engine: risk refused: {e}"),
                }
                self.refusals.push((symbol.clone(), code));
                rec.note = Some(format!("{symbol} {}: refused: {code}", w.side));
                return Vec::new();
            }
        };
        rec.orders.push((symbol.to_string(), w.side.to_string(), w.qty));
        self.oms_call(|oms| oms.submit(approved).map(|c| c.into_iter().collect()))
    }

    /// The full risk checks when configured, else the notional cap alone.
    pub(super) fn approve(
        &self,
        req: OrderRequest,
    ) -> Result<crate::risk::RiskApproved<OrderRequest>, (&'static str, String)> {
        let Some(r) = &self.risk else {
            return approve_notional(req, self.cfg.max_order_notional)
                .map_err(|e| ("max_order_notional", e.to_string()));
        };
        // Orders still working count: open buys as held and spent, open sells as no longer held.
        let closes: BTreeMap<Symbol, f64> = self.last_closes().into_iter().collect();
        let price = |s: &Symbol| closes.get(s).copied().unwrap_or(req.ref_price);
        let (positions, cash) = super::account::with_working(&self.oms, self.holdings(), self.cash, req.side, price);
        // Equity or cash that is not a number (a NaN price got in) is refused, never read as 0.
        let number = |x: f64| Some(x).filter(|x| x.is_finite()).and_then(Decimal::from_f64_retain);
        let (Some(equity), Some(cash)) = (number(self.equity()), number(cash)) else {
            let why = format!("equity {} or cash {cash} is not a number: no order until it is", self.equity());
            log::error!("engine: {} {} refused: {why}", req.symbol, req.side);
            return Err(("non_finite", why));
        };
        let ctx = RiskContext {
            equity,
            cash,
            positions: &positions,
            // Ages count from the bar's close: a 15Min bar is fresh when its bucket closes.
            bar_time: req.bar_time + chrono::Duration::seconds(r.timeframe.seconds()),
            timeframe: r.timeframe,
            now: self.clock.now(),
            inputs_finite: self.obs.iter().all(|v| v.is_finite()),
            assets: &r.assets,
        };
        r.checks.check(req, &ctx).map_err(|e| (e.reason(), e.to_string()))
    }

    pub(super) fn store_decision(&self, rec: &DecisionRecord) {
        let mut key = time_key(rec.t).to_vec();
        key.extend_from_slice(self.cfg.strategy.name.as_bytes());
        if let Err(e) = self.decisions.insert(&key, rec) {
            log::error!("engine: cannot store the decision at {}: {e}", rec.t);
        }
    }

    pub(super) fn oms_call(&mut self, f: impl FnOnce(&mut Oms) -> Result<Vec<Command>, OmsError>) -> Vec<Command> {
        crate::oms::commands_of(f(&mut self.oms), "engine", &mut self.halted)
    }
}
