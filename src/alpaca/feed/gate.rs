//! `BarGate`: lets each (symbol, minute) through once, in time order per symbol, whichever path (stream
//! or REST backfill) brings it first.

use crate::domain::{Bar, Symbol};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Drops bars already let through: per symbol, the newest minute passed so far; anything at or before it is a
/// repeat (or late) and is dropped.
#[derive(Debug, Default)]
pub struct BarGate {
    last: HashMap<Symbol, DateTime<Utc>>,
}

impl BarGate {
    /// A gate that has already let through each symbol's bars up to the given time.
    pub fn resuming(last: &HashMap<Symbol, DateTime<Utc>>) -> BarGate {
        BarGate { last: last.clone() }
    }

    /// True (and remembered) when `bar` is newer than every bar of its symbol let through so far.
    pub fn admit(&mut self, bar: &Bar) -> bool {
        match self.last.get(&bar.symbol) {
            Some(t) if bar.t <= *t => false,
            _ => {
                self.last.insert(bar.symbol.clone(), bar.t);
                true
            }
        }
    }

    /// Whether a bar of this symbol and time was already let through (for updated bars).
    pub fn seen(&self, bar: &Bar) -> bool {
        self.last.get(&bar.symbol).is_some_and(|t| bar.t <= *t)
    }

    /// Where a backfill must start: just after the oldest "last bar" over `symbols`, or `default` when a
    /// symbol has none yet.
    pub fn resume_from(&self, symbols: &[Symbol], default: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
        let mut from: Option<DateTime<Utc>> = None;
        for s in symbols {
            let t = match self.last.get(s) {
                Some(t) => *t + chrono::Duration::seconds(1),
                None => default?,
            };
            from = Some(from.map_or(t, |f| f.min(t)));
        }
        from
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timeframe;

    fn bar(sym: &str, secs: i64) -> Bar {
        let t = DateTime::from_timestamp(secs, 0).unwrap();
        Bar::new(Symbol::new(sym).unwrap(), Timeframe::MIN1, t, 1.0, 1.0, 1.0, 1.0, 1.0).unwrap()
    }

    #[test]
    fn once_and_in_order_per_symbol() {
        let mut g = BarGate::default();
        assert!(g.admit(&bar("A", 60)));
        assert!(!g.admit(&bar("A", 60)), "duplicate");
        assert!(!g.admit(&bar("A", 0)), "older");
        assert!(g.admit(&bar("B", 0)), "other symbols are independent");
        assert!(g.seen(&bar("A", 60)) && !g.seen(&bar("A", 120)));
        let syms = [Symbol::new("A").unwrap(), Symbol::new("B").unwrap()];
        assert_eq!(g.resume_from(&syms, None), DateTime::from_timestamp(1, 0));
        assert_eq!(g.resume_from(&[Symbol::new("C").unwrap()], None), None);

        let held = HashMap::from([(syms[0].clone(), DateTime::from_timestamp(120, 0).unwrap())]);
        let mut r = BarGate::resuming(&held);
        assert!(!r.admit(&bar("A", 120)), "a bar already held is not delivered again");
        assert!(r.admit(&bar("A", 180)));
        let from = DateTime::from_timestamp(30, 0);
        assert_eq!(r.resume_from(&syms, from), from, "B has nothing held: it starts at backfill_from");
    }
}
