//! "risk refused …" lines for people: at INFO once per symbol and reason per trading day (New York) in
//! the whole process, however many engines run in it (the daemon's, its replay's, `tradebot
//! backtest`'s), and at DEBUG after that. The promotion gate's and a search's backtests run inside
//! `at_debug`: their refusals are said at DEBUG only and leave the day's INFO lines to the engine that
//! trades. Every refusal is still counted and stored with its decision.

use chrono::{DateTime, NaiveDate, Utc};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The (New York day, symbol, reason) refusals said at INFO, oldest day first.
static SAID: Mutex<BTreeSet<(NaiveDate, String, &'static str)>> = Mutex::new(BTreeSet::new());

/// How many said refusals are remembered; past it the oldest days are forgotten. Engines of one process
/// may run on different clocks (a replay beside a backtest of another period), so a day is not dropped
/// because another engine's clock is later.
const REMEMBERED: usize = 4096;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with this thread's refusals said at DEBUG (a gate's or a search's backtest).
pub fn at_debug<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            QUIET.with(|q| q.set(self.0));
        }
    }
    let _restore = Restore(QUIET.with(|q| q.replace(true)));
    f()
}

/// The level to say a refusal of `symbol` for `reason` at, at `now` by the engine's clock (a replay's
/// day is its simulated one, not the wall clock's).
pub(super) fn level(symbol: &str, reason: &'static str, now: DateTime<Utc>) -> log::Level {
    if QUIET.with(Cell::get) {
        return log::Level::Debug;
    }
    let day = now.with_timezone(&chrono_tz::America::New_York).date_naive();
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    let new = said.insert((day, symbol.to_string(), reason));
    while said.len() > REMEMBERED {
        said.pop_first();
    }
    if new { log::Level::Info } else { log::Level::Debug }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// The day is the engine's (a replay's simulated day), not the wall clock's: the same refusal is said
    /// at INFO once on each simulated day, at DEBUG again on that day.
    #[test]
    fn a_refusal_is_said_once_per_day_of_the_engines_clock() {
        let day = |d: u32| Utc.with_ymd_and_hms(2011, 3, d, 15, 0, 0).unwrap();
        let (sym, why) = ("REFUSALS-TEST", "max_position");
        assert_eq!(level(sym, why, day(1)), log::Level::Info);
        assert_eq!(level(sym, why, day(1)), log::Level::Debug);
        assert_eq!(level(sym, why, day(2)), log::Level::Info, "the next simulated day says it again");
        assert_eq!(at_debug(|| level("REFUSALS-TEST-2", why, day(3))), log::Level::Debug);
    }
}
