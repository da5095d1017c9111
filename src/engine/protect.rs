//! Prices between bars and the sells that protect the account.
//!
//! - **Marks** (`Event::Mark`): live, every stored minute bar of a longer timeframe moves its symbol's
//!   freshest price; the account is marked to market on it, the daily loss limit is checked on that equity
//!   and the trailing stops on that price (a minute never counts down a stop's cooldown, which is in bars
//!   of the timeframe). On `1Day` an intraday crash is seen within the minute, not at the close. Backtests
//!   have no marks: their prices are the bars', as in the env.
//! - **Protective sells** (a trailing stop, the kill switch's flatten, a flatten asked for by a person) are
//!   priced from the freshest price, stamped with the clock, and never refused as stale (the stale rule is
//!   for the model's entries). Alpaca refuses an order that could execute against an open order of the
//!   other side of the same symbol ("potential wash trade detected"), so our working buys of the symbol are
//!   canceled first and the sell waits (`pending`) until the cancels are confirmed: it goes out on the next
//!   broker update, reconciliation or tick that finds no buy of ours working, for the whole holding then.
//! - **The kill switch's flatten is retried**: while it is tripped under `flatten` and a configured symbol
//!   is still held with no sell working or waiting (a sell refused or rejected), the sells go out again
//!   after 5 s, doubling to at most 5 min, each failure logged and counted for an alert; until flat, or
//!   until a person pauses the engine.

use super::Command;
use super::account::{working_count, working_qty};
use super::core::{Engine, PRICE_GAP};
use super::protect_state::{FlattenOutcome, KillRetry, ProtectFailures};
use crate::domain::{Bar, ClientOrderId, OrderRequest, OrderWhy, Qty, Side, Symbol};
use crate::risk::{StopOut, approve_reducing_sell};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

/// The first wait before the kill switch's flatten is sent again, and the longest.
const RETRY_FIRST: Duration = Duration::seconds(5);
const RETRY_MAX: Duration = Duration::minutes(5);

impl Engine {
    /// The engine's clock's time (given when it was built).
    pub(super) fn clock_now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The freshest price of symbol `k`: its last mark when that is not older than its last bar, else the
    /// bar's close (0 before either).
    pub(super) fn fresh_price(&self, k: usize) -> f64 {
        match (&self.last[k], &self.marks[k]) {
            (Some(b), Some(m)) if m.t >= b.t => m.c,
            (Some(b), _) => b.c,
            (None, Some(m)) => m.c,
            (None, None) => 0.0,
        }
    }

    /// A bar opening a split's size away from `prev` pauses its symbol (live bars only).
    pub(super) fn check_gap(&mut self, k: usize, bar: &Bar, prev: f64) {
        if !self.gap_guard || self.gapped[k] || prev <= 0.0 {
            return;
        }
        let ratio = bar.o / prev;
        if !(PRICE_GAP.0..=PRICE_GAP.1).contains(&ratio) {
            log::error!(
                "engine: {} opens at {} against the previous price {prev} (x{ratio:.2}): a split or a bad price? \
                 {} is paused (no stop, no order) until `tradebot resume`; a restart warms up on the stored \
                 (split-adjusted) bars",
                bar.symbol,
                bar.o,
                bar.symbol
            );
            self.gapped[k] = true;
        }
    }

    /// A minute bar between two bars of the timeframe (see the module doc).
    pub(super) fn on_mark(&mut self, bar: Bar) -> Vec<Command> {
        let Some(k) = self.cfg.symbols.iter().position(|s| *s == bar.symbol) else { return Vec::new() };
        let newer = self.marks[k].as_ref().is_none_or(|m| m.t < bar.t);
        if !(newer && bar.c.is_finite() && bar.c > 0.0) {
            return Vec::new();
        }
        self.check_gap(k, &bar, self.fresh_price(k));
        if self.gapped[k] {
            return Vec::new();
        }
        let (t, price, symbol) = (bar.t, bar.c, bar.symbol.clone());
        self.marks[k] = Some(bar);
        if self.halted || !self.oms.ready() {
            return Vec::new();
        }
        let mut cmds = self.on_equity(t);
        let before = self.risk.as_ref().map(|r| r.checks.stops().position(&symbol));
        if let Some(s) = self.risk.as_mut().and_then(|r| r.checks.stops_mut().on_price(&symbol, price)) {
            cmds.extend(self.stop_out(s, t, before));
        }
        cmds
    }

    /// Live, after a fill or a broker snapshot: the account marked to market again (at the freshest
    /// prices) and the daily loss limit checked on it, at the clock's time. Backtests check it on bars only.
    pub(super) fn mark_account(&mut self) -> Vec<Command> {
        if !self.gap_guard || self.halted || !self.oms.ready() || self.last.iter().any(Option::is_none) {
            return Vec::new();
        }
        let now = self.clock_now();
        self.on_equity(now)
    }

    /// A trailing stop fired: sell the holding (less what is already being sold). The stop is disarmed
    /// only once its sell is on its way: a refused sell leaves it armed for the next price.
    /// `t`: the bar or minute it fired on (its sell's id derives from it, so a restart re-derives it).
    pub(super) fn stop_out(
        &mut self,
        s: StopOut,
        t: DateTime<Utc>,
        before: Option<crate::exec::Position>,
    ) -> Vec<Command> {
        let held = self.oms.position(&s.symbol) - working_qty(&self.oms, &s.symbol, Side::Sell);
        let qty = Qty::from_f64(s.qty).map(|q| q.get()).unwrap_or_default().min(held);
        log::warn!("engine: trailing stop on {} at {} (high {}): selling {qty}", s.symbol, s.price, s.high_water);
        let cmds = if qty > Decimal::ZERO {
            self.protect(OrderWhy::Stop, t, vec![(s.symbol.clone(), qty)])
        } else {
            Vec::new()
        };
        if cmds.is_empty()
            && !self.pending.contains_key(&s.symbol)
            && let (Some(r), Some(p)) = (self.risk.as_mut(), before)
        {
            log::warn!("engine: the stop's sell of {} did not go out; the stop stays armed", s.symbol);
            r.checks.stops_mut().restore(&s.symbol, p);
        }
        cmds
    }

    /// Cancels our working buys, then sells every position in the configured symbols, then pauses.
    /// Positions and orders outside tradebot's symbols, and orders placed by hand, are left alone. What
    /// went out, waits or failed is kept for the status (`flatten_outcome`).
    pub(super) fn flatten(&mut self) -> Vec<Command> {
        self.paused = true;
        let ours = |s: &Symbol| self.cfg.symbols.contains(s);
        let plan: Vec<(Symbol, Decimal)> = self.oms.positions().into_iter().filter(|(s, _)| ours(s)).collect();
        let at = self.clock_now();
        let seq = self.flatten_outcome.as_ref().map_or(1, |o| o.seq + 1);
        self.flatten_outcome = Some(FlattenOutcome { seq, at, ..FlattenOutcome::default() });
        // Our buys of symbols not held are canceled too: a flatten leaves nothing of ours working to buy.
        let held: Vec<Symbol> = plan.iter().map(|(s, _)| s.clone()).collect();
        let mut cmds = Vec::new();
        for s in self.cfg.symbols.clone().into_iter().filter(|s| !held.contains(s)) {
            cmds.extend(self.cancel_our_buys(&s));
        }
        cmds.extend(self.protect(OrderWhy::Flatten, at, plan));
        let o = self.flatten_outcome.as_ref();
        let (sent, waiting, failed) = o.map_or((0, 0, 0), |o| (o.sent.len(), o.waiting.len(), o.failed.len()));
        log::info!("engine: flatten: {sent} sell(s) sent, {waiting} waiting for cancels, {failed} failed; paused");
        cmds
    }

    /// Cancels the buys of ours still working on `symbol` (not those placed by hand); returns the commands.
    fn cancel_our_buys(&mut self, symbol: &Symbol) -> Vec<Command> {
        let ids: Vec<ClientOrderId> = self
            .oms
            .open_orders()
            .filter(|o| o.side == Side::Buy && !o.adopted && o.symbol == *symbol)
            .map(|o| o.client_order_id.clone())
            .collect();
        let mut cmds = Vec::new();
        for id in ids {
            cmds.extend(self.oms_call(|oms| oms.cancel(&id).map(|c| c.into_iter().collect())));
        }
        cmds
    }

    /// Protective sells of `plan` (see the module doc): each symbol's sell goes out now, or after the
    /// cancel of our working buys of it. `stamp`: the time its client order ids derive from.
    pub(super) fn protect(
        &mut self,
        why: OrderWhy,
        stamp: DateTime<Utc>,
        plan: Vec<(Symbol, Decimal)>,
    ) -> Vec<Command> {
        let mut cmds = Vec::new();
        let mut now_ready = Vec::new();
        for (symbol, qty) in plan {
            if working_count(&self.oms, &symbol, Side::Buy) == 0 {
                now_ready.push((symbol, qty));
                continue;
            }
            let canceled = self.cancel_our_buys(&symbol);
            if canceled.is_empty()
                && self.oms.open_orders().all(|o| !(o.symbol == symbol && o.side == Side::Buy && !o.adopted))
            {
                log::warn!(
                    "engine: {why} sell of {symbol}: a buy placed by hand is working; the broker may refuse the sell as a wash trade"
                );
                now_ready.push((symbol, qty));
                continue;
            }
            log::info!(
                "engine: {why} sell of {symbol} waits for the cancel of our working buy (the broker refuses a sell against it as a wash trade)"
            );
            cmds.extend(canceled);
            if let Some(o) = self.flatten_outcome.as_mut().filter(|_| why == OrderWhy::Flatten) {
                o.waiting.push(symbol.clone());
            }
            self.pending.insert(symbol, (why, stamp));
        }
        cmds.extend(self.sell_now(why, stamp, now_ready));
        cmds
    }

    /// The protective sells waiting for cancels whose symbol has no buy of ours working any more: sold
    /// now, for the whole holding less what is already being sold.
    pub(super) fn release_pending(&mut self) -> Vec<Command> {
        if self.pending.is_empty() || self.halted || !self.oms.ready() {
            return Vec::new();
        }
        let ready: Vec<(Symbol, (OrderWhy, DateTime<Utc>))> = self
            .pending
            .iter()
            .filter(|(s, _)| !self.oms.open_orders().any(|o| o.symbol == **s && o.side == Side::Buy && !o.adopted))
            .map(|(s, w)| (s.clone(), *w))
            .collect();
        let mut cmds = Vec::new();
        for (symbol, (why, stamp)) in ready {
            self.pending.remove(&symbol);
            if let Some(o) = self.flatten_outcome.as_mut().filter(|_| why == OrderWhy::Flatten) {
                o.waiting.retain(|s| *s != symbol);
            }
            let qty = self.oms.position(&symbol) - working_qty(&self.oms, &symbol, Side::Sell);
            if qty > Decimal::ZERO {
                log::info!("engine: our buy of {symbol} is no longer working; the {why} sell goes out");
                cmds.extend(self.sell_now(why, stamp, vec![(symbol, qty)]));
            }
        }
        cmds
    }

    /// Sells `plan`'s quantities now, at the freshest prices; risk lets sells that reduce a long position
    /// through (the kill switch and staleness included). Client order ids derive from `stamp` and a tag per
    /// reason (the same tags as ever, so a restart re-derives the same ids for the same bar).
    fn sell_now(&mut self, why: OrderWhy, stamp: DateTime<Utc>, plan: Vec<(Symbol, Decimal)>) -> Vec<Command> {
        let tag = match why {
            OrderWhy::Stop => "stop",
            OrderWhy::KillSwitch => "killsw",
            OrderWhy::Flatten => "flatten",
            OrderWhy::Model | OrderWhy::Manual => "sell",
        };
        let mut cmds = Vec::new();
        for (i, (symbol, qty)) in plan.into_iter().enumerate() {
            let k = self.cfg.symbols.iter().position(|s| *s == symbol);
            let price = k.map_or(0.0, |k| self.fresh_price(k));
            // What Alpaca takes of the holding (its increment); dust below it or its minimum is left.
            let Some(qty) = self.sellable(&symbol, qty, price) else { continue };
            let Ok(q) = Qty::new(qty) else { continue };
            let req = OrderRequest {
                client_order_id: ClientOrderId::derive(tag, &symbol, stamp, i as u16),
                symbol: symbol.clone(),
                side: Side::Sell,
                qty: q,
                tif: crate::risk::tif_for(&symbol, self.risk.as_ref().map(|r| &r.assets)),
                bar_time: stamp,
                ref_price: price,
                why,
            };
            let approved = match &self.risk {
                Some(_) => self.approve(req).map_err(|(_, e)| e),
                None => {
                    let held = self.oms.position(&req.symbol) - working_qty(&self.oms, &req.symbol, Side::Sell);
                    approve_reducing_sell(req, held).map_err(|e| e.to_string())
                }
            };
            let out = match approved {
                Ok(a) => self.oms_call(|oms| oms.submit(a).map(|c| c.into_iter().collect())),
                Err(e) => {
                    log::error!("engine: {why} sell of {symbol} refused: {e}");
                    self.note_failure(why, &symbol, e);
                    continue;
                }
            };
            if let Some(o) = self.flatten_outcome.as_mut().filter(|_| why == OrderWhy::Flatten) {
                match out
                    .iter()
                    .find_map(|c| if let Command::Submit(a) = c { Some(a.client_order_id.clone()) } else { None })
                {
                    Some(id) => {
                        o.sent.push(symbol.clone());
                        o.unconfirmed.push((symbol.clone(), id));
                    }
                    None => o.failed.push((symbol.clone(), "the order manager did not send it (see the log)".into())),
                }
            }
            cmds.extend(out);
        }
        cmds
    }

    /// `qty` of `symbol` rounded down to what the broker takes (9 places, the pair's increment), or
    /// `None` when that is nothing or worth less than a crypto order's minimum (dust: not sellable, and
    /// not a failure to sell).
    fn sellable(&self, symbol: &Symbol, qty: Decimal, price: f64) -> Option<Decimal> {
        let assets = self.risk.as_ref().map(|r| &r.assets);
        let q = crate::risk::order_qty(symbol, assets, qty);
        let value = Decimal::from_f64_retain(price).map(|p| p * q);
        let dust =
            crate::risk::is_crypto(symbol, assets) && value.is_some_and(|v| v < crate::risk::CRYPTO_MIN_NOTIONAL);
        (q > Decimal::ZERO && !dust).then_some(q)
    }

    fn note_failure(&mut self, why: OrderWhy, symbol: &Symbol, e: String) {
        if let Some(o) = self.flatten_outcome.as_mut().filter(|_| why == OrderWhy::Flatten) {
            o.failed.push((symbol.clone(), e.clone()));
        }
        // The kill switch's retry counts (and alerts) its own failures once each, at its next look.
        if why == OrderWhy::KillSwitch {
            return;
        }
        self.protect_failures.count += 1;
        self.protect_failures.last = Some(format!("{why} sell of {symbol} refused: {e}"));
    }

    /// The kill switch's flatten, again (see the module doc); on each tick.
    pub(super) fn retry_kill_flatten(&mut self) -> Vec<Command> {
        let flatten = self
            .risk()
            .and_then(|r| r.kill_switch())
            .is_some_and(|k| k.action == crate::config::KillSwitchAction::Flatten);
        if !flatten || self.paused || self.halted || !self.oms.ready() {
            self.kill_retry = KillRetry::default();
            return Vec::new();
        }
        let left: Vec<(Symbol, Decimal)> = self
            .cfg
            .symbols
            .iter()
            .filter(|s| !self.pending.contains_key(*s))
            .filter_map(|s| {
                let k = self.cfg.symbols.iter().position(|x| x == s)?;
                let q = self.oms.position(s) - working_qty(&self.oms, s, Side::Sell);
                self.sellable(s, q, self.fresh_price(k)).map(|_| (s.clone(), q))
            })
            .collect();
        let now = self.clock_now();
        if left.is_empty() {
            if self.kill_retry.failures > 0 {
                log::info!("engine: the kill switch's flatten is done: nothing of ours is held or unsold");
            }
            self.kill_retry = KillRetry::default();
            return Vec::new();
        }
        match self.kill_retry.next_at {
            None => {
                let r = &mut self.kill_retry;
                r.failures += 1;
                let wait = (RETRY_FIRST * 2i32.pow(r.failures.saturating_sub(1).min(10))).min(RETRY_MAX);
                r.next_at = Some(now + wait);
                let names: Vec<String> = left.iter().map(|(s, q)| format!("{q} {s}")).collect();
                let what = format!(
                    "the kill switch's flatten has not sold {} (sell refused or rejected); sending again in {} s (failure {})",
                    names.join(", "),
                    wait.num_seconds(),
                    r.failures
                );
                log::error!("engine: {what}");
                self.protect_failures.count += 1;
                self.protect_failures.last = Some(what);
                Vec::new()
            }
            Some(t) if now >= t => {
                self.kill_retry.next_at = None;
                self.protect(OrderWhy::KillSwitch, now, left)
            }
            Some(_) => Vec::new(),
        }
    }

    /// The broker's answer to a flatten's sell: acknowledged (`refused: None`), or refused, rejected or
    /// never sent, with why.
    pub(super) fn flatten_answer(&mut self, id: &ClientOrderId, refused: Option<String>) {
        let Some(o) = self.flatten_outcome.as_mut() else { return };
        let Some(i) = o.unconfirmed.iter().position(|(_, c)| c == id) else { return };
        let (symbol, _) = o.unconfirmed.remove(i);
        if let Some(why) = refused {
            o.sent.retain(|s| *s != symbol);
            log::error!("engine: flatten: the sell of {symbol} was not accepted: {why}");
            o.failed.push((symbol.clone(), why.clone()));
            self.protect_failures.count += 1;
            self.protect_failures.last = Some(format!("flatten sell of {symbol} not accepted: {why}"));
        }
    }

    /// What the last flatten asked for by a person did.
    pub fn flatten_outcome(&self) -> Option<&FlattenOutcome> {
        self.flatten_outcome.as_ref()
    }

    /// Protective sells that could not go out so far.
    pub fn protect_failures(&self) -> &ProtectFailures {
        &self.protect_failures
    }
}

/// For tests: the symbols waiting for a cancel before their protective sell.
#[cfg(test)]
pub(super) fn pending_of(e: &Engine) -> std::collections::BTreeMap<Symbol, OrderWhy> {
    e.pending.iter().map(|(s, (w, _))| (s.clone(), *w)).collect()
}
