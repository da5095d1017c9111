use super::*;
use crate::data::{ImportOptions, daily_bar_time, import_csv};
use crate::domain::{Symbol, Timeframe};
use crate::store::Store;
use chrono::{Duration, NaiveDate, TimeZone, Utc};
use proptest::prelude::*;
use std::path::Path;

/// The shipped daily bars of one symbol, split-adjusted, via a throwaway store. The file is read from the
/// source tree, or from `$TRADEBOT_SOURCE_DIR/data` where a test binary runs away from it (the GPU kit).
pub(crate) fn real_bars(sym: &str) -> Vec<Bar> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let root = std::env::var_os("TRADEBOT_SOURCE_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    let path = Path::new(&root).join("data/stocks-daily-2000-2013.csv.gz");
    let opts = ImportOptions { symbols: vec![Symbol::new(sym).unwrap()], ..Default::default() };
    import_csv(&store, &path, &opts).unwrap();
    let from = Utc.with_ymd_and_hms(1990, 1, 1, 0, 0, 0).unwrap();
    store.bars(&Symbol::new(sym).unwrap(), Timeframe::DAY1, from, from + Duration::days(365 * 50)).unwrap()
}

fn synthetic(closes: &[f64], volumes: &[f64]) -> Vec<Bar> {
    let d0 = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
    closes
        .iter()
        .zip(volumes)
        .enumerate()
        .map(|(i, (&c, &v))| {
            let t = daily_bar_time(d0 + Duration::days(i as i64));
            Bar::new(Symbol::new("XYZ").unwrap(), Timeframe::DAY1, t, c, c * 1.01, c * 0.99, c, v).unwrap()
        })
        .collect()
}

fn bits(m: &FeatureMatrix, upto: usize) -> Vec<u32> {
    m.values[..upto * m.n_cols].iter().map(|x| x.to_bits()).collect()
}

#[test]
fn streaming_equals_batch_bit_for_bit_on_real_data() {
    let spec = FeatureSpec::default();
    for sym in ["AAPL", "GOOG", "FB"] {
        let bars = real_bars(sym);
        let m = batch(&spec, &bars);
        assert_eq!(m.rows(), bars.len());
        // Streaming one bar at a time, with the state cloned (as a restart from a snapshot would) half-way.
        let mut s = FeatureState::new(spec.clone());
        let mut row = vec![0f32; spec.n_cols()];
        for (i, b) in bars.iter().enumerate() {
            if i == bars.len() / 2 {
                s = s.clone();
            }
            let ready = s.update_into(b.o, b.h, b.l, b.c, b.v, &mut row);
            assert_eq!(ready, m.ready[i], "{sym} row {i}");
            let a: Vec<u32> = row.iter().map(|x| x.to_bits()).collect();
            let e: Vec<u32> = m.row(i).iter().map(|x| x.to_bits()).collect();
            assert_eq!(a, e, "{sym} row {i}");
        }
    }
}

#[test]
fn real_data_rows_are_finite_and_ready_after_warmup() {
    let spec = FeatureSpec::default();
    let bars = real_bars("AAPL");
    let m = batch(&spec, &bars);
    assert!(m.values.iter().all(|x| x.is_finite()));
    let w = spec.warmup();
    assert!(m.ready[..w - 1].iter().all(|r| !r), "rows before the warm-up must not be ready");
    assert!(m.ready[w - 1..].iter().all(|r| *r));
    assert!(m.values[..(w - 1) * m.n_cols].iter().all(|x| *x == 0.0));
    // Every column moves once warmed up (no feature stuck at a constant on real prices).
    for col in 0..m.n_cols {
        let first = m.row(w - 1)[col];
        assert!((w..m.rows()).any(|i| m.row(i)[col] != first), "column {} is constant", spec.names()[col]);
    }
    let rsi = spec.names().iter().position(|n| n.starts_with("rsi")).unwrap();
    assert!((w - 1..m.rows()).all(|i| (0.0..=1.0).contains(&m.row(i)[rsi])));
}

#[test]
fn no_look_ahead_changing_later_bars_leaves_earlier_rows() {
    let spec = FeatureSpec::default();
    let bars = real_bars("MSFT");
    let base = batch(&spec, &bars);
    for t in (0..bars.len() - 1).step_by(61) {
        let mut changed = bars.clone();
        for (k, b) in changed[t + 1..].iter_mut().enumerate() {
            let f = if k % 2 == 0 { 1.7 } else { 0.45 };
            b.o *= f;
            b.h *= f * 1.05;
            b.l *= f;
            b.c *= f;
            b.v = b.v * 3.0 + 1.0;
        }
        let m = batch(&spec, &changed);
        assert_eq!(bits(&m, t + 1), bits(&base, t + 1), "a row up to {t} moved");
        assert_eq!(m.ready[..=t], base.ready[..=t]);
        // The changed tail does change something, so the comparison has teeth.
        assert_ne!(bits(&m, bars.len()), bits(&base, bars.len()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn no_look_ahead_on_random_series(
        closes in prop::collection::vec(1.0f64..500.0, 80..160),
        t_frac in 0.0f64..1.0,
        bump in 0.5f64..2.0,
    ) {
        let vols: Vec<f64> = closes.iter().map(|c| c * 10.0).collect();
        let spec = FeatureSpec::default();
        let bars = synthetic(&closes, &vols);
        let t = ((closes.len() - 1) as f64 * t_frac) as usize;
        let mut later = closes.clone();
        for c in &mut later[t + 1..] { *c *= bump; }
        let changed = synthetic(&later, &vols);
        let a = batch(&spec, &bars);
        let b = batch(&spec, &changed);
        prop_assert_eq!(bits(&a, t + 1), bits(&b, t + 1));
    }
}

#[test]
fn constant_prices_give_defined_values_not_nan() {
    let spec = FeatureSpec::default();
    let n = 200;
    let bars = synthetic(&vec![100.0; n], &vec![1000.0; n]);
    let m = batch(&spec, &bars);
    let names = spec.names();
    let col = |p: &str| names.iter().position(|n| n.starts_with(p)).unwrap();
    assert!(m.values.iter().all(|x| x.is_finite()));
    let last = m.row(n - 1);
    assert_eq!(last[col("logret_1")], 0.0);
    assert_eq!(last[col("vol_")], 0.0);
    assert_eq!(last[col("sma_ratio_10")], 0.0);
    assert_eq!(last[col("rsi_")], 0.5);
    assert_eq!(last[col("bb_pos_")], 0.5);
    assert_eq!(last[col("volume_z_")], 0.0);
    assert_eq!(last[col("cci_")], 0.0);
    // Zero volume everywhere is valid too.
    let m = batch(&spec, &synthetic(&vec![5.0; n], &vec![0.0; n]));
    assert!(m.values.iter().all(|x| x.is_finite()));
}

#[test]
fn hand_computed_values() {
    let spec = FeatureSpec {
        return_horizons: vec![1, 2],
        vol_windows: vec![2],
        sma_windows: vec![3],
        ema_spans: vec![3],
        macd_fast: 2,
        macd_slow: 3,
        macd_signal: 2,
        rsi_period: 2,
        cci_period: 3,
        adx_period: 2,
        bb_window: 3,
        bb_k: 2.0,
        volume_z_window: 3,
    };
    assert_eq!(spec.warmup(), 4);
    let closes = [10.0, 11.0, 12.0, 13.0, 12.0];
    let m = batch(&spec, &synthetic(&closes, &[1.0, 2.0, 3.0, 4.0, 8.0]));
    assert_eq!(m.ready, vec![false, false, false, true, true]);
    let names = spec.names();
    let get = |i: usize, p: &str| m.row(i)[names.iter().position(|n| n == p).unwrap()];
    assert_eq!(get(4, "logret_1"), (12.0f64 / 13.0).ln() as f32);
    assert_eq!(get(4, "logret_2"), (12.0f64 / 12.0).ln() as f32);
    // SMA_3 at t=4 = (12 + 13 + 12) / 3.
    assert_eq!(get(4, "sma_ratio_3"), (12.0 / ((12.0 + 13.0 + 12.0) / 3.0) - 1.0) as f32);
    // EMA_3 (alpha 0.5) seeded with 10: 10, 10.5, 11.25, 12.125, 12.0625.
    assert_eq!(get(4, "ema_ratio_3"), (12.0 / 12.0625 - 1.0) as f32);
    // RSI_2 after rises only (t=3) is 1; Wilder at t=4: gain 1 -> 0.5, loss 0 -> 0.5: RSI 0.5.
    assert_eq!(get(3, "rsi_2"), 1.0);
    assert_eq!(get(4, "rsi_2"), 0.5);
    // Volume z at t=4 over [3, 4, 8]: mean 5, population sd sqrt(14/3).
    assert_eq!(get(4, "volume_z_3"), (3.0 / (14.0f64 / 3.0).sqrt()) as f32);
}

#[test]
fn spec_names_match_columns_and_bad_specs_are_refused() {
    let spec = FeatureSpec::default();
    assert_eq!(spec.names().len(), spec.n_cols());
    assert!(spec.check().is_empty());
    assert!(spec.fingerprint().starts_with(&format!("features-v{FEATURE_VERSION}:")));
    let bad = FeatureSpec { macd_fast: 30, bb_k: f64::NAN, vol_windows: vec![1], ..FeatureSpec::default() };
    let errs: Vec<String> = bad.check().iter().map(|e| e.to_string()).collect();
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("features.macd_fast = 30: must be below macd_slow")));
    assert_ne!(bad.fingerprint(), spec.fingerprint());
}
