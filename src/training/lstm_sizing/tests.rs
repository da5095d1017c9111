//! The sizing rule on hand-counted panels, the sample count against the batch windows, and the
//! not-enough-data message.

use super::*;
use crate::config::TrainConfig;
use crate::features::tests::real_bars;

/// Three symbols of 413 bars (600 calendar days of day bars). With the default features (warm-up 50)
/// a window is ready once 50 + fast_len - 1 fast rows and 50 + slow_len - 1 slow bars have closed: at
/// bar (49 + slow_len) x slow_factor - 1 here, as the slow bars bind. Labelled = 413 - that - horizon.
#[test]
fn the_window_shrinks_step_by_step_to_the_target_or_its_bounds() {
    let spec = FeatureSpec::default();
    let bars = [413, 413, 413];
    let cfg = LstmConfig::default();
    let at = |slow_len: usize, slow_factor: usize, horizon: usize| WindowSpec {
        slow_len,
        slow_factor,
        horizon,
        ..cfg.window_spec()
    };
    // The configured window: (49 + 10) x 5 - 1 = 294, 413 - 294 - 5 = 114 per symbol.
    assert_eq!(labelled(&spec, &cfg.window_spec(), 413), 114);
    // Enough at the configured window: kept as it is.
    let few = LstmConfig { target_samples: 342, ..cfg.clone() };
    assert_eq!(size(&few, &spec, &bars), cfg.window_spec());
    // slow_len 10 → 5 (139 each, 417), → 2 (154, 462), then slow_factor 5 → 4: (51 x 4 - 1 = 203) 205 each, 615.
    let mid = LstmConfig { target_samples: 600, ..cfg.clone() };
    assert_eq!(size(&mid, &spec, &bars), at(2, 4, 5));
    assert_eq!(pooled(&spec, &at(2, 4, 5), &bars), 615);
    // The default target (1500) is out of reach: every bound is hit, slow_factor 2 (first ready bar 101)
    // and horizon 2, 310 each.
    assert_eq!(size(&cfg, &spec, &bars), at(2, 2, 2));
    assert_eq!(pooled(&spec, &at(2, 2, 2), &bars), 930);
    // Bounds above the configured values leave those as they are.
    let fixed = LstmConfig { min_slow_len: 10, min_slow_factor: 5, min_horizon: 5, ..cfg.clone() };
    assert_eq!(size(&fixed, &spec, &bars), cfg.window_spec());
    // Ten years of day bars (the shipped training) reach the target at the configured window.
    assert_eq!(size(&cfg, &spec, &[2515, 2515, 2515]), cfg.window_spec());
}

#[test]
fn the_counted_samples_are_the_batch_windows_labelled_ones() {
    let spec = FeatureSpec::default();
    let bars = real_bars("AAPL");
    for w in [
        LstmConfig::default().window_spec(),
        WindowSpec { slow_len: 2, slow_factor: 2, horizon: 2, fast_len: 12, ..LstmConfig::default().window_spec() },
    ] {
        for n in [120, 413, 900] {
            let built = windows::build(&spec, &w, &bars[..n]);
            let want = built.label.iter().filter(|l| l.is_some()).count();
            assert_eq!(labelled(&spec, &w, n), want, "{w:?} over {n} bars");
        }
    }
}

#[test]
fn the_history_reaches_back_and_the_entries_asked_follow_the_split() {
    let d = |y, m, day| chrono::NaiveDate::from_ymd_opt(y, m, day);
    let cfg = LstmConfig { history_days: 3650, ..LstmConfig::default() };
    let rolling = TrainConfig {
        rolling: Some(crate::config::Rolling { window_days: 600, holdout_days: 60 }),
        from: None,
        to: None,
        holdout_from: None,
        holdout_to: None,
        checkpoint_every: 10,
    };
    let on = rolling.resolve(d(2011, 8, 31).unwrap());
    assert_eq!((on.from, on.train_end()), (d(2009, 11, 10), d(2011, 7, 2)));
    // A 600-day rolling window reaches back ten years from its end.
    assert_eq!(cfg.history_from(&rolling, &on), d(2001, 7, 5));
    // A window longer than the history keeps its start; fixed dates are kept as they are.
    let short = LstmConfig { history_days: 30, ..cfg.clone() };
    assert_eq!(short.history_from(&rolling, &on), d(2009, 11, 10));
    assert_eq!(cfg.history_from(&on, &on), d(2009, 11, 10));
    // 20 entries asked of a large split; one per 50 samples of a small one; at least one.
    assert_eq!(cfg.min_entries(5000), 20);
    assert_eq!(cfg.min_entries(180), 3);
    assert_eq!(cfg.min_entries(10), 1);
}

#[test]
fn not_enough_data_names_the_count_the_need_and_the_fix() {
    let e = NotEnoughData { samples: 141, per_symbol: 47, days: 420, need: MIN_SAMPLES, history_days: 3650 };
    let m = e.to_string();
    assert!(m.starts_with("not enough data for the LSTM: 141 labelled samples (47 per symbol over 420 days), need 300: import more history (`tradebot data import"), "{m}");
    assert!(m.contains("lstm.min_slow_len"), "{m}");
}

#[test]
fn the_sizing_keys_are_checked_with_the_fix_in_words() {
    let bad = |cfg: LstmConfig| cfg.validate().unwrap_err().to_string();
    let d = LstmConfig::default();
    assert!(d.validate().is_ok());
    let m = bad(LstmConfig { min_slow_factor: 1, ..d.clone() });
    assert!(m.contains("lstm.min_slow_factor must be at least 2"), "{m}");
    let m = bad(LstmConfig { history_days: 0, ..d.clone() });
    assert!(m.contains("lstm.history_days must be in [1, 36500]"), "{m}");
    let m = bad(LstmConfig { min_horizon: 0, ..d });
    assert!(m.contains("lstm.min_slow_len and lstm.min_horizon must be at least 1"), "{m}");
}
