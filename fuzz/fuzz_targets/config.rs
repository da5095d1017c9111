//! Fuzzes the config parser: any text must give a `Config` or a `ConfigError` naming the problem, never
//! panic. Run: `cargo +nightly fuzz run config` (corpus: fuzz/corpus/config).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tradebot::fuzzing::config(data));
