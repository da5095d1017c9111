//! "risk refused …" lines for people: at INFO once per symbol and reason per trading day (New York) in
//! the whole process, however many engines run in it (the daemon's, its replay's, `tradebot
//! backtest`'s), and at DEBUG after that. The promotion gate's and a search's backtests run inside
//! `at_debug`: their refusals are said at DEBUG only and leave the day's INFO lines to the engine that
//! trades. Every refusal is still counted and stored with its decision.

use chrono::NaiveDate;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The (symbol, reason, New York day) refusals said at INFO.
static SAID: Mutex<BTreeSet<(String, &'static str, NaiveDate)>> = Mutex::new(BTreeSet::new());

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

/// The level to say a refusal of `symbol` for `reason` at, now.
pub(super) fn level(symbol: &str, reason: &'static str) -> log::Level {
    if QUIET.with(Cell::get) {
        return log::Level::Debug;
    }
    let day = crate::clock::now().with_timezone(&chrono_tz::America::New_York).date_naive();
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    // Earlier days are done with.
    said.retain(|(_, _, d)| *d >= day);
    if said.insert((symbol.to_string(), reason, day)) { log::Level::Info } else { log::Level::Debug }
}
