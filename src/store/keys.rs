//! Key encodings that make sled's byte order equal time order, so a time range is one ordered scan.
//!
//! - time: microseconds since the Unix epoch as an `i64`, sign bit flipped, big-endian (8 bytes);
//! - bar: `symbol 0x00 tf_tag tf_n(u16 BE) time` — symbols never contain 0x00, so `symbol 0x00` is an
//!   exact prefix for one symbol's bars.

use crate::domain::{Symbol, Timeframe};
use chrono::{DateTime, Utc};

/// The 8-byte key of an instant: ordered as the instants are, microsecond resolution.
pub fn time_key(t: DateTime<Utc>) -> [u8; 8] {
    ((t.timestamp_micros() as u64) ^ (1u64 << 63)).to_be_bytes()
}

/// The instant in a key's first 8 bytes (the inverse of `time_key`); `None` when the key is shorter or out of
/// chrono's range.
pub fn time_from_key(k: &[u8]) -> Option<DateTime<Utc>> {
    let b: [u8; 8] = k.get(..8)?.try_into().ok()?;
    let micros = (u64::from_be_bytes(b) ^ (1u64 << 63)) as i64;
    DateTime::from_timestamp_micros(micros)
}

fn tf_n(tf: Timeframe) -> u16 {
    match tf {
        Timeframe::Minutes(n) | Timeframe::Hours(n) | Timeframe::Days(n) | Timeframe::Weeks(n) => n,
    }
}

/// The prefix shared by all bars of one symbol and timeframe.
pub fn bar_prefix(symbol: &Symbol, tf: Timeframe) -> Vec<u8> {
    let mut k = Vec::with_capacity(symbol.as_str().len() + 12);
    k.extend_from_slice(symbol.as_str().as_bytes());
    k.push(0);
    k.push(tf.tag());
    k.extend_from_slice(&tf_n(tf).to_be_bytes());
    k
}

/// The key of one bar: `bar_prefix` followed by its start time's `time_key`.
pub fn bar_key(symbol: &Symbol, tf: Timeframe, t: DateTime<Utc>) -> Vec<u8> {
    let mut k = bar_prefix(symbol, tf);
    k.extend_from_slice(&time_key(t));
    k
}

/// Splits a bar key back into (symbol, timeframe, time).
pub fn parse_bar_key(k: &[u8]) -> Option<(Symbol, Timeframe, DateTime<Utc>)> {
    let zero = k.iter().position(|&b| b == 0)?;
    let symbol = Symbol::new(std::str::from_utf8(&k[..zero]).ok()?).ok()?;
    let rest = &k[zero + 1..];
    if rest.len() != 11 {
        return None;
    }
    let n = u16::from_be_bytes([rest[1], rest[2]]);
    let tf = match rest[0] {
        b'm' => Timeframe::Minutes(n),
        b'h' => Timeframe::Hours(n),
        b'd' => Timeframe::Days(n),
        b'w' => Timeframe::Weeks(n),
        _ => return None,
    };
    Some((symbol, tf, time_from_key(&rest[3..])?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn time_keys_sort_like_times(a in -2_000_000_000_000_000i64..4_000_000_000_000_000, b in -2_000_000_000_000_000i64..4_000_000_000_000_000) {
            let ta = DateTime::from_timestamp_micros(a).unwrap();
            let tb = DateTime::from_timestamp_micros(b).unwrap();
            prop_assert_eq!(ta.cmp(&tb), time_key(ta).cmp(&time_key(tb)));
            prop_assert_eq!(time_from_key(&time_key(ta)), Some(ta));
        }
    }

    #[test]
    fn bar_keys_round_trip_and_group_by_symbol() {
        let s = Symbol::new("BRK.B").unwrap();
        let t = DateTime::from_timestamp(1_000_000_000, 0).unwrap();
        let k = bar_key(&s, Timeframe::Minutes(15), t);
        assert_eq!(parse_bar_key(&k), Some((s.clone(), Timeframe::Minutes(15), t)));
        assert!(k.starts_with(&bar_prefix(&s, Timeframe::Minutes(15))));
        // "A" bars must not fall inside the "AA" prefix scan and vice versa.
        let a = bar_prefix(&Symbol::new("A").unwrap(), Timeframe::DAY1);
        let aa = bar_key(&Symbol::new("AA").unwrap(), Timeframe::DAY1, t);
        assert!(!aa.starts_with(&a));
    }
}
