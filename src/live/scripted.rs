//! `ScriptedCore`: a scripted trading core for the live runner's tests and the core of the crash test
//! (the daemon trades with `engine::Engine`). It is not a strategy: on every bar it buys a fixed quantity
//! of the bar's symbol, with the deterministic client_order_id of that decision (strategy "script", symbol,
//! bar time, 0), through the OMS, which it embeds; everything else (updates, reconciliations, reconnects,
//! failures) goes to the OMS.

use super::Core;
use crate::domain::{ClientOrderId, OrderRequest, Qty, Side};
use crate::engine::{Command, Control, Event};
use crate::oms::{Oms, OmsError};
use crate::risk::approve_notional;
use rust_decimal::Decimal;

pub(crate) struct ScriptedCore {
    oms: Oms,
    qty: Qty,
    max_notional: Decimal,
    /// Ask for a reconciliation every this many ticks (0: never).
    reconcile_every: u64,
    ticks: u64,
    /// No new orders: shutdown began, or the store failed.
    halted: bool,
}

impl ScriptedCore {
    pub(crate) const STRATEGY: &'static str = "script";

    pub(crate) fn new(oms: Oms, qty: Qty, max_notional: Decimal, reconcile_every: u64) -> Self {
        ScriptedCore { oms, qty, max_notional, reconcile_every, ticks: 0, halted: false }
    }

    #[cfg(test)]
    pub(crate) fn oms(&self) -> &Oms {
        &self.oms
    }

    fn on_bar(&mut self, bar: crate::domain::Bar) -> Vec<Command> {
        if self.halted {
            return Vec::new();
        }
        if !self.oms.ready() {
            log::info!("scripted core: bar {} {} not traded: not reconciled yet", bar.symbol, bar.t);
            return Vec::new();
        }
        let req = OrderRequest {
            client_order_id: ClientOrderId::derive(Self::STRATEGY, &bar.symbol, bar.t, 0),
            symbol: bar.symbol.clone(),
            side: Side::Buy,
            qty: self.qty,
            tif: crate::risk::tif_for(&bar.symbol, None),
            bar_time: bar.t,
            ref_price: bar.c,
            why: crate::domain::OrderWhy::Model,
        };
        let approved = match approve_notional(req, self.max_notional) {
            Ok(a) => a,
            Err(e) => {
                log::warn!("scripted core: {e}");
                return Vec::new();
            }
        };
        self.oms_result(|oms| oms.submit(approved).map(|c| c.into_iter().collect()))
    }

    /// Runs an OMS call; a store failure halts new orders (the state on disk can no longer be trusted
    /// to record them).
    fn oms_result(&mut self, f: impl FnOnce(&mut Oms) -> Result<Vec<Command>, OmsError>) -> Vec<Command> {
        crate::oms::commands_of(f(&mut self.oms), "scripted core", &mut self.halted)
    }

    fn log_positions(&self) {
        let p = self.oms.positions();
        let json = serde_json::to_string(&p).unwrap_or_default();
        log::info!("scripted core: reconciled; positions {json}");
    }
}

impl Core for ScriptedCore {
    fn process(&mut self, ev: Event) -> Vec<Command> {
        match ev {
            Event::Bar(b) => self.on_bar(b),
            // The harness buys on bars it gets; a missing one is nothing to buy on.
            Event::NoBar { .. } => Vec::new(),
            // The harness trades each minute itself; marks between bars have nothing to check.
            Event::Mark(_) => Vec::new(),
            Event::Order(u) => self.oms_result(|oms| oms.on_update(&u).map(|_| Vec::new())),
            Event::Reconciled(snap) => {
                let out = self.oms_result(|oms| oms.reconcile(&snap).map(|_| Vec::new()));
                self.log_positions();
                out
            }
            Event::BrokerReconnected => vec![self.oms.on_broker_reconnected()],
            Event::SubmitFailed { client_order_id, reason, retriable } => {
                self.oms_result(|oms| oms.on_submit_failed(&client_order_id, &reason, retriable))
            }
            Event::Sending { client_order_id } => self.oms_result(|oms| oms.on_sending(&client_order_id)),
            Event::NotSent { client_order_id } => self.oms_result(|oms| oms.on_not_sent(&client_order_id)),
            Event::Tick => {
                self.ticks += 1;
                let due = self.reconcile_every > 0 && self.ticks.is_multiple_of(self.reconcile_every);
                if due { vec![self.oms.request_reconcile()] } else { Vec::new() }
            }
            Event::Control(Control::Shutdown | Control::Pause | Control::Flatten) => {
                self.halted = true;
                Vec::new()
            }
            Event::Control(Control::Resume) => {
                self.halted = false;
                Vec::new()
            }
            // No model, no risk checks, no trading hours: nothing for the harness to change.
            Event::Update(_) => Vec::new(),
        }
    }
}
