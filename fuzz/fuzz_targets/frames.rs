//! Fuzzes the Alpaca frame parsers: any bytes, as a market-data frame and as a trade_updates frame, must
//! give a `Frame` (items, unknown count, errors) and never panic. Run: `cargo +nightly fuzz run frames`
//! (corpus: fuzz/corpus/frames).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tradebot::fuzzing::frames(data));
