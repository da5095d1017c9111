//! The engine's answers to events other than bars: broker order updates (each new fill moves cash and the
//! stops once), reconciliations (cash, the value of holdings outside the configured symbols, the stops'
//! holdings), submit failures, ticks and controls; and the daily loss limit on a bar's equity (live, also
//! after every fill and snapshot: `protect::mark_account`).

use super::core::Engine;
use super::lstm_source::LstmProbs;
use super::{Command, Control, Event};
use crate::contract::{LoadedModel, Update};
use crate::domain::{OrderUpdate, Symbol};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

impl Engine {
    /// A broker snapshot: cash is the broker's; the value of holdings outside the configured symbols is
    /// the broker's equity less cash and the configured positions; the stops follow the holdings.
    pub(super) fn on_snapshot(&mut self, snap: &crate::engine::BrokerSnapshot) {
        if let Some(c) = snap.cash.to_f64() {
            self.cash = c;
        }
        let configured = |s: &Symbol| self.cfg.symbols.contains(s);
        self.outside_value = match snap.equity.to_f64() {
            Some(e) if e > 0.0 && snap.positions.iter().any(|(s, q)| !configured(s) && !q.is_zero()) => {
                e - self.cash - self.configured_value()
            }
            _ => 0.0,
        };
        self.sync_stops();
    }

    /// New fills (each once, as the OMS reports them): cash at once, fees included, and the stops.
    pub(super) fn on_fills(&mut self, changes: &[crate::oms::OmsChange]) {
        self.cash = super::account::cash_after_fills(self.cash, changes, self.cfg.exec.fee_bps);
        for c in changes {
            let crate::oms::OmsChange::Fill(f) = c else { continue };
            let (qty, price) = (f.qty.to_f64().unwrap_or(0.0), f.price.to_f64().unwrap_or(0.0));
            if self.audit {
                let fee = qty * price * self.cfg.exec.fee_bps / 10_000.0;
                log::info!(
                    "fill: {} {} {} at {} (notional {}, fee {} at env.fee_bps), order {}",
                    f.side,
                    f.qty,
                    f.symbol,
                    crate::domain::money(price),
                    crate::domain::money(qty * price),
                    crate::domain::money(fee),
                    f.client_order_id
                );
            }
            if let Some(r) = self.risk.as_mut() {
                r.checks.on_fill(&f.symbol, f.side, qty, price);
            }
        }
        self.sync_stops();
    }

    /// The stops' holdings set to the OMS's (after restarts, adopted positions, inferred fills).
    pub(super) fn sync_stops(&mut self) {
        let Some(r) = self.risk.as_mut() else { return };
        for (k, s) in self.cfg.symbols.iter().enumerate() {
            let held = self.oms.position(s).to_f64().unwrap_or(0.0);
            let price = self.last[k].as_ref().map_or(0.0, |b| b.c);
            r.checks.stops_mut().sync(s, held, price);
        }
    }

    /// The daily loss limit on this bar's equity; a trip under `flatten` sells everything now.
    pub(super) fn on_equity(&mut self, t: DateTime<Utc>) -> Vec<Command> {
        // Never 0 for a NaN: that would read as a 100% loss and trip the kill switch for nothing.
        let Some(equity) = Some(self.equity()).filter(|e| e.is_finite()).and_then(Decimal::from_f64_retain) else {
            log::error!("engine: equity is {} at {t}: the daily loss limit is not checked on it", self.equity());
            return Vec::new();
        };
        let Some(r) = self.risk.as_mut() else { return Vec::new() };
        // Called on every bar and, live, every minute: the holdings are built only when the switch trips.
        match r.checks.on_equity(t, equity) {
            Ok(Some(k)) => {
                log::error!(
                    "engine: kill switch tripped at {t}: {} ({})",
                    k.reason,
                    crate::risk::action_name(k.action)
                );
                let holdings = self.holdings();
                let plan = self.risk().map(|r| r.flatten_plan(&holdings)).unwrap_or_default();
                // Its own tag: a manual flatten of the same bar ("flatten") must not reuse these ids.
                if plan.is_empty() { Vec::new() } else { self.protect(crate::domain::OrderWhy::KillSwitch, t, plan) }
            }
            Ok(None) => Vec::new(),
            Err(e) => {
                log::error!("engine: cannot store the kill switch state: {e}; no new orders from here on");
                self.halted = true;
                Vec::new()
            }
        }
    }
}

impl crate::engine::Core for Engine {
    /// One event, its critical writes (a bar's orders, decision record, risk state) in one group commit:
    /// one flush, before any order of it is handed back to be sent. Orders whose records could not be
    /// flushed are not sent, and the engine sends no new order from then on.
    fn process(&mut self, ev: Event) -> Vec<Command> {
        let store = self.store.clone();
        let group = store.group();
        let mut cmds = self.dispatch(ev);
        if let Err(e) = group.commit() {
            let held = cmds.iter().filter(|c| matches!(c, Command::Submit(_))).count();
            log::error!(
                "engine: cannot flush this event's records to the store: {e}; its {held} order(s) are not sent, \
                 and no new orders from here on (restart once the store is writable)"
            );
            self.halted = true;
            cmds.retain(|c| !matches!(c, Command::Submit(_)));
        }
        cmds
    }
}

impl Engine {
    fn dispatch(&mut self, ev: Event) -> Vec<Command> {
        match ev {
            Event::Bar(b) => self.on_bar(b),
            Event::Mark(b) => self.on_mark(b),
            Event::NoBar { symbol, t } => self.on_no_bar(&symbol, t),
            Event::Order(u) => self.on_order(&u),
            Event::Reconciled(snap) => {
                let mut cmds = self.oms_call(|oms| oms.reconcile(&snap).map(|_| Vec::new()));
                self.on_snapshot(&snap);
                cmds.extend(self.mark_account());
                cmds.extend(self.release_pending());
                cmds
            }
            Event::BrokerReconnected => vec![self.oms.on_broker_reconnected()],
            Event::SubmitFailed { client_order_id, reason, retriable } => {
                if !retriable {
                    self.flatten_answer(&client_order_id, Some(reason.clone()));
                }
                self.oms_call(|oms| oms.on_submit_failed(&client_order_id, &reason, retriable))
            }
            Event::Sending { client_order_id } => self.oms_call(|oms| oms.on_sending(&client_order_id)),
            Event::NotSent { client_order_id } => {
                self.flatten_answer(&client_order_id, Some("not sent: the daemon is shutting down".into()));
                self.oms_call(|oms| oms.on_not_sent(&client_order_id))
            }
            Event::Tick => self.on_tick(),
            Event::Control(Control::Pause) => {
                self.paused = true;
                Vec::new()
            }
            Event::Control(Control::Resume) => {
                self.paused = false;
                for (k, g) in self.gapped.iter_mut().enumerate() {
                    if std::mem::take(g) {
                        log::warn!("engine: {} trades again (resumed after a price gap)", self.cfg.symbols[k]);
                    }
                }
                Vec::new()
            }
            Event::Control(Control::Flatten) => self.flatten(),
            Event::Control(Control::Shutdown) => {
                self.halted = true;
                Vec::new()
            }
            Event::Update(u) => {
                self.on_update(u);
                Vec::new()
            }
        }
    }

    /// An order update from the broker: a flatten's answer, the fills the OMS takes (a duplicate event is
    /// not counted twice) moving cash and stops, then orders held for it released.
    fn on_order(&mut self, u: &OrderUpdate) -> Vec<Command> {
        if let Some(id) = &u.order.client_order_id {
            let refused = matches!(
                u.order.status,
                crate::domain::OrderStatus::Rejected
                    | crate::domain::OrderStatus::Canceled
                    | crate::domain::OrderStatus::Expired
            );
            self.flatten_answer(id, refused.then(|| format!("the broker reports it {}", u.order.broker_status)));
        }
        // Only the fills the OMS takes (a duplicate event is not counted twice) move cash and stops.
        let mut changes = Vec::new();
        let cmds = self.oms_call(|oms| {
            oms.on_update(u).map(|c| {
                changes = c;
                Vec::new()
            })
        });
        self.on_fills(&changes);
        let mut cmds = cmds;
        if !changes.is_empty() {
            cmds.extend(self.mark_account());
        }
        cmds.extend(self.release_pending());
        cmds
    }

    /// A tick: held orders released, a kill switch's flatten retried, a reconciliation asked for every
    /// `reconcile_every` ticks.
    fn on_tick(&mut self) -> Vec<Command> {
        self.ticks += 1;
        let every = self.cfg.reconcile_every;
        let mut cmds = self.release_pending();
        cmds.extend(self.retry_kill_flatten());
        if every > 0 && self.ticks.is_multiple_of(every) {
            cmds.push(self.oms.request_reconcile());
        }
        cmds
    }
}

impl Engine {
    /// A change from the daemon, between two bars.
    fn on_update(&mut self, u: Update) {
        match u {
            Update::Model(swap) => match swap.take() {
                Some(LoadedModel::Ppo(p)) => self.set_policy(p),
                Some(LoadedModel::Lstm { policy, features, window }) => match self.probs_mut() {
                    // A model sized to other windows (`training::lstm_sizing`) cannot read the ones built.
                    Some(src) if src.lstm_window().is_some_and(|w| w != window) => {
                        log::info!(
                            "engine: LSTM model {} → {}, whose windows differ: it trades once they fill from the next bars",
                            src.model_id(),
                            policy.id()
                        );
                        self.set_probs(Box::new(LstmProbs::new(*policy, features, window)));
                    }
                    Some(src) => {
                        let from = src.model_id();
                        let to = policy.id().to_string();
                        if src.set_lstm(*policy) {
                            log::info!("engine: LSTM model {from} → {to}");
                        } else {
                            log::warn!(
                                "engine: the LSTM model {to} is not used: this engine's probabilities come from {from}"
                            );
                        }
                    }
                    None => {
                        log::info!("engine: the LSTM trades once its windows fill from the next bars");
                        self.set_probs(Box::new(LstmProbs::new(*policy, features, window)));
                    }
                },
                None => log::debug!("engine: a model update already taken"),
            },
            Update::Limits(limits) => {
                if let Some(r) = self.risk_mut() {
                    r.set_limits(*limits);
                }
            }
            Update::Calendar(c) => {
                if let Some(r) = self.risk_mut() {
                    r.set_calendar(*c);
                }
            }
            Update::ClearKill { who, at } => {
                if let Some(r) = self.risk_mut()
                    && let Err(e) = r.clear_kill(&who, at)
                {
                    log::error!("engine: the kill switch could not be cleared ({who}): {e}; it stays tripped");
                }
            }
        }
    }
}
