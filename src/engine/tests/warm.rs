//! Warm-up on the stored bars: the last bars of each symbol fill the features without a decision, so the
//! first bar after them is decided on; too few leave the features cold.

use super::{Rig, feed, rig, snapshot};
use crate::domain::{Bar, Timeframe};
use crate::engine::{Core, DecisionRecord, StrategyMode};
use crate::features::FeatureSpec;
use crate::store::TreeName;

fn decisions(r: &Rig) -> Vec<DecisionRecord> {
    let tree = r.store.tree::<DecisionRecord>(TreeName::Decisions).unwrap();
    tree.scan_prefix(b"").unwrap().into_iter().map(|(_, d)| d).collect()
}

/// A rig whose store holds every bar but the last of each symbol in `with` (the rest have none).
fn stored_but_the_last(with: usize) -> Rig {
    let r = rig(StrategyMode::Ppo, None);
    let n = r.bars[0].len();
    let stored: Vec<Bar> = r.bars.iter().take(with).flat_map(|b| b[..n - 1].iter().cloned()).collect();
    r.store.put_bars(&stored).unwrap();
    r
}

#[test]
fn the_last_stored_bars_warm_the_features_so_the_next_bar_is_decided_on() {
    let w = FeatureSpec::default().warmup();
    let mut r = stored_but_the_last(2);
    let last = r.bars[0].len() - 1;
    assert_eq!(r.engine.warm_up_on_store(&r.store, Timeframe::DAY1, w).unwrap(), 2 * w, "w bars of each of two");
    assert!(decisions(&r).is_empty(), "no decision on a stored bar");
    let newest: Vec<_> = r.engine.last.iter().map(|b| b.as_ref().map(|b| b.t)).collect();
    assert_eq!(newest, vec![Some(r.bars[0][last - 1].t); 2], "the newest stored bars, not the oldest");
    r.engine.process(snapshot(100_000));
    feed(&mut r.engine, &r.bars, last);
    let got: Vec<_> = decisions(&r).iter().map(|d| d.t).collect();
    assert_eq!(got, vec![r.bars[0][last].t], "the first bar after the warm-up is decided on");

    // Fewer stored bars than the features need: the next bar is not decided on.
    let mut cold = stored_but_the_last(2);
    assert_eq!(cold.engine.warm_up_on_store(&cold.store, Timeframe::DAY1, w - 2).unwrap(), 2 * (w - 2));
    cold.engine.process(snapshot(100_000));
    feed(&mut cold.engine, &cold.bars, last);
    assert!(decisions(&cold).is_empty(), "the features were not warm");
}

#[test]
fn a_symbol_with_no_stored_bar_is_skipped_and_keeps_the_engine_from_deciding() {
    let w = FeatureSpec::default().warmup();
    let mut r = stored_but_the_last(1);
    assert_eq!(r.engine.warm_up_on_store(&r.store, Timeframe::DAY1, w).unwrap(), w, "only the first symbol's");
    r.engine.process(snapshot(100_000));
    let last = r.bars[0].len() - 1;
    feed(&mut r.engine, &r.bars, last);
    assert!(decisions(&r).is_empty(), "the second symbol's features are cold");
}
