//! Fuzzes the REST response parsers and the error classifier: any bytes as a body must parse or give a
//! `RestError`, never panic. Run: `cargo +nightly fuzz run rest` (corpus: fuzz/corpus/rest).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tradebot::fuzzing::rest(data));
