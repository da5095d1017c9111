//! "risk refused …" lines for people: at INFO when a refusal of a symbol for a reason begins, at DEBUG while
//! it goes on, in the whole process however many engines run in it (the daemon's, its replay's, `tradebot
//! backtest`'s). A refusal goes on while the same symbol is refused for the same reason within `QUIET_FOR`
//! of the last time by the engine's clock (a replay's simulated time, not the wall clock's): on daily bars
//! a position cap that binds for months is said once, not once a bar, and said again once it has stopped
//! binding for a week. The promotion gate's and a search's backtests run inside `at_debug`: their refusals
//! are said at DEBUG only. Every refusal is still counted and stored with its decision.

use chrono::{DateTime, Duration, Utc};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;

/// The last time (by the refusing engine's clock) each symbol was refused for each reason.
type LastRefused = HashMap<(String, &'static str), DateTime<Utc>>;
static LAST: Mutex<Option<LastRefused>> = Mutex::new(None);

/// A refusal this long after the last one of its symbol and reason (or this long before it: another
/// engine's clock, on another period) begins again and is said at INFO.
const QUIET_FOR: Duration = Duration::days(7);

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

/// The level to say a refusal of `symbol` for `reason` at, at `now` by the engine's clock.
pub(super) fn level(symbol: &str, reason: &'static str, now: DateTime<Utc>) -> log::Level {
    if QUIET.with(Cell::get) {
        return log::Level::Debug;
    }
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let prev = last.get_or_insert_with(HashMap::new).insert((symbol.to_string(), reason), now);
    match prev {
        Some(p) if (now - p).abs() <= QUIET_FOR => log::Level::Debug,
        _ => log::Level::Info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// The engine's clock, not the wall clock's: a refusal is said at INFO when it begins, at DEBUG while
    /// it goes on bar after bar (a streak of simulated days), and at INFO again once it has stopped for
    /// longer than `QUIET_FOR`.
    #[test]
    fn a_refusal_is_said_when_it_begins_and_again_after_a_quiet_week_of_the_engines_clock() {
        let day = |d: u32| Utc.with_ymd_and_hms(2011, 3, d, 15, 0, 0).unwrap();
        let (sym, why) = ("REFUSALS-TEST", "max_position");
        assert_eq!(level(sym, why, day(1)), log::Level::Info);
        assert_eq!(level(sym, why, day(1)), log::Level::Debug);
        assert_eq!(level(sym, why, day(2)), log::Level::Debug, "the next simulated day goes on quietly");
        assert_eq!(level(sym, why, day(4)), log::Level::Debug, "over a weekend too");
        assert_eq!(level(sym, why, day(12)), log::Level::Info, "8 days without it: it begins again");
        assert_eq!(level(sym, "max_order_notional", day(12)), log::Level::Info, "another reason is its own");
        assert_eq!(at_debug(|| level("REFUSALS-TEST-2", why, day(3))), log::Level::Debug);
    }
}
