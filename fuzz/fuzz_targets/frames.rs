//! Fuzzes the Alpaca frame parsers: any bytes, as a market-data frame and as a trade_updates frame, must
//! give a `Frame` (items, unknown count, errors) and never panic. Run: `cargo +nightly fuzz run frames`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tradebot::alpaca::parse::{market_frame, updates_frame};

fuzz_target!(|data: &[u8]| {
    let _ = market_frame(data);
    let _ = updates_frame(data);
});
