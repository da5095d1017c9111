//! Missing bars: a period that closed with bars of other symbols but none of this one (a quiet or halted
//! stock) carries the symbol's last close to that period, so the others are still decided on. The
//! carried symbol keeps its last features, is stale until its next bar and is never traded while stale
//! (refusal `stale`); past `max_stale_bars` carried bars it is reported down. Its return is logged once.

use super::core::Engine;
use crate::contract::Command;
use crate::domain::{Bar, Symbol};
use chrono::{DateTime, Utc};

impl Engine {
    /// `market.max_stale_bars`: carried bars before a symbol is reported down (default 3).
    pub fn with_max_stale_bars(mut self, n: u32) -> Self {
        self.max_stale_bars = n;
        self
    }

    /// Symbols carried at their last close, with how many bars, and whether they are down (past the limit).
    pub fn stale_symbols(&self) -> Vec<(Symbol, u32, bool)> {
        let max = self.max_stale_bars;
        self.cfg
            .symbols
            .iter()
            .zip(&self.stale)
            .filter(|(_, n)| **n > 0)
            .map(|(s, n)| (s.clone(), *n, *n > max))
            .collect()
    }

    pub(super) fn on_no_bar(&mut self, symbol: &Symbol, t: DateTime<Utc>) -> Vec<Command> {
        let Some(k) = self.cfg.symbols.iter().position(|s| s == symbol) else { return Vec::new() };
        // Only forward: a late notice for a period the symbol already has a bar for changes nothing.
        let Some(prev) = self.last[k].as_ref().filter(|p| p.t < t) else { return Vec::new() };
        let Ok(carried) = Bar::new(symbol.clone(), prev.timeframe, t, prev.c, prev.c, prev.c, prev.c, 0.0) else {
            return Vec::new();
        };
        self.stale[k] += 1;
        let n = self.stale[k];
        if n == 1 {
            let close = crate::domain::figure(prev.c);
            log::info!("engine: no {symbol} bar at {t}; its last close {close} is carried and it is not traded");
        } else if n == self.max_stale_bars + 1 {
            log::warn!(
                "engine: {symbol} is down: no bar for {n} periods (market.max_stale_bars = {}); not traded until its next bar",
                self.max_stale_bars
            );
        }
        self.last[k] = Some(carried);
        self.decide_if_complete(t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{feed, rig, risk_cfg, snapshot, submits, with_risk};
    use super::super::{Core, Event, StrategyMode};
    use crate::domain::Symbol;
    use crate::exec::ExecParams;
    use crate::features::FeatureSpec;
    use crate::store::TreeName;

    #[test]
    fn a_missing_bar_carries_the_symbol_which_is_not_traded_and_is_down_past_the_limit() {
        // The rig's constant policy buys AAPL and sells MSFT (none held) on every decision.
        let exec = ExecParams { max_trade: 20.0, ..ExecParams::default() };
        let w = FeatureSpec::default().warmup();
        let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("1000000"), &exec);
        for d in 0..w {
            clock.set(r.bars[0][d].t);
            feed(&mut r.engine, &r.bars, d);
        }
        r.engine.process(snapshot(100_000));
        let aapl = Symbol::new("AAPL").unwrap();
        let store = r.store.clone();
        let decisions = || store.tree::<super::super::DecisionRecord>(TreeName::Decisions).unwrap().len();
        let before = decisions();
        // MSFT's bar alone: no decision (AAPL's may still come).
        let mut msft = r.bars[1][w].clone();
        clock.set(msft.t);
        assert!(r.engine.process(Event::Bar(msft.clone())).is_empty());
        assert_eq!(decisions(), before);
        // AAPL had none in that period: carried, the decision is taken, and AAPL is not bought.
        let cmds = r.engine.process(Event::NoBar { symbol: aapl.clone(), t: msft.t });
        assert_eq!(decisions(), before + 1, "decided with AAPL carried");
        assert!(submits(&cmds).is_empty(), "a stale symbol is never traded: {cmds:?}");
        assert!(r.engine.take_refusals().contains(&(aapl.clone(), "stale")));
        assert_eq!(r.engine.stale_symbols(), [(aapl.clone(), 1, false)]);
        // A late notice for a period already passed changes nothing.
        assert!(r.engine.process(Event::NoBar { symbol: aapl.clone(), t: msft.t }).is_empty());
        assert_eq!(r.engine.stale_symbols(), [(aapl.clone(), 1, false)]);
        // Three more periods without AAPL: past max_stale_bars (3) it is down.
        for _ in 0..3 {
            msft.t += chrono::Duration::days(1);
            clock.set(msft.t);
            r.engine.process(Event::Bar(msft.clone()));
            r.engine.process(Event::NoBar { symbol: aapl.clone(), t: msft.t });
        }
        assert_eq!(r.engine.stale_symbols(), [(aapl.clone(), 4, true)]);
        // Its own bar brings it back, and it trades again.
        let mut back = r.bars[0][w].clone();
        back.t = msft.t + chrono::Duration::days(1);
        msft.t = back.t;
        clock.set(back.t);
        let mut cmds = r.engine.process(Event::Bar(msft));
        cmds.extend(r.engine.process(Event::Bar(back)));
        assert!(r.engine.stale_symbols().is_empty(), "{:?}", r.engine.stale_symbols());
        assert!(submits(&cmds).iter().any(|(s, _, _)| s == "AAPL"), "{cmds:?}");
    }
}
