//! Bars of several symbols on common times: the panel the training environment and backtests trade
//! needs one bar per symbol at every step, so a time missing for any symbol is dropped for all.

use crate::domain::{Bar, Symbol, Timeframe};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Keeps the bars whose time every list has; each list stays in time order. An empty input gives an
/// empty output.
pub(crate) fn align_bars(per_symbol: Vec<Vec<Bar>>) -> Vec<Vec<Bar>> {
    let n = per_symbol.len();
    let mut count: HashMap<DateTime<Utc>, usize> = HashMap::new();
    for bars in &per_symbol {
        for b in bars {
            *count.entry(b.t).or_default() += 1;
        }
    }
    per_symbol.into_iter().map(|bars| bars.into_iter().filter(|b| count.get(&b.t) == Some(&n)).collect()).collect()
}

/// The stored bars of `symbols` with `from <= t <= to`, aligned on the times all of them have, in the
/// order of `symbols`.
pub(crate) fn aligned_bars(
    store: &Store,
    symbols: &[Symbol],
    tf: Timeframe,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Vec<Bar>>, StoreError> {
    let per_symbol = symbols.iter().map(|s| store.bars(s, tf, from, to)).collect::<Result<Vec<_>, _>>()?;
    Ok(align_bars(per_symbol))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::daily_bar_time;
    use chrono::NaiveDate;

    fn bars(sym: &str, days: &[u32]) -> Vec<Bar> {
        let s = Symbol::new(sym).unwrap();
        days.iter()
            .map(|d| {
                let t = daily_bar_time(NaiveDate::from_ymd_opt(2010, 1, *d).unwrap());
                let c = 10.0 + *d as f64;
                Bar::new(s.clone(), Timeframe::DAY1, t, c, c + 1.0, c - 1.0, c, 100.0).unwrap()
            })
            .collect()
    }

    #[test]
    fn keeps_only_common_times_in_order() {
        let out = align_bars(vec![bars("A", &[4, 5, 6, 7]), bars("B", &[5, 6, 8]), bars("C", &[5, 6, 7, 8])]);
        for (k, list) in out.iter().enumerate() {
            let days: Vec<u32> = list.iter().map(|b| (b.c - 10.0) as u32).collect();
            assert_eq!(days, [5, 6], "symbol {k}");
        }
        assert_eq!(out[1][0].symbol.as_str(), "B", "lists keep their symbol order");
        assert!(align_bars(vec![]).is_empty());
        assert!(align_bars(vec![bars("A", &[1]), vec![]]).iter().all(Vec::is_empty));
    }

    #[test]
    fn reads_the_store_within_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.put_bars(&bars("A", &[1, 2, 3, 4])).unwrap();
        store.put_bars(&bars("B", &[2, 3, 4, 5])).unwrap();
        let (a, b) = (Symbol::new("A").unwrap(), Symbol::new("B").unwrap());
        let day = |d| daily_bar_time(NaiveDate::from_ymd_opt(2010, 1, d).unwrap());
        let out = aligned_bars(&store, &[b, a], Timeframe::DAY1, day(1), day(3)).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].iter().map(|x| x.t).collect::<Vec<_>>(), [day(2), day(3)]);
        assert_eq!(out[0][0].symbol.as_str(), "B");
        assert_eq!(out[1][1].symbol.as_str(), "A");
    }
}
