//! Tests of the LSTM windows: batch and streaming bit-identical, no look-ahead, slow-bar alignment,
//! labels and the time split.

use super::*;
use crate::features::tests::real_bars;

fn wspec() -> WindowSpec {
    WindowSpec { fast_len: 20, slow_len: 8, slow_factor: 5, horizon: 5, up_threshold: 0.02, down_threshold: -0.02 }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The windows of sample `k` gathered from the batch panels, as the device dataset gathers them.
fn gather(sw: &SymbolWindows, k: usize, nf: usize, nc: usize, w: &WindowSpec) -> WindowInputs {
    let (i, s) = (sw.bar[k], sw.slow_end[k]);
    WindowInputs {
        fast: sw.fast[(i + 1 - w.fast_len) * nf..(i + 1) * nf].to_vec(),
        slow: sw.slow[(s + 1 - w.slow_len) * nf..(s + 1) * nf].to_vec(),
        context: sw.context[i * nc..(i + 1) * nc].to_vec(),
    }
}

#[test]
fn streaming_equals_batch_bit_for_bit_on_real_data() {
    let spec = FeatureSpec::default();
    let w = wspec();
    let bars = real_bars("AAPL");
    let sw = build(&spec, &w, &bars);
    let (nf, nc) = (spec.n_cols(), context_names(&spec).len());
    assert!(sw.bar.len() > 2000, "most bars are samples: {}", sw.bar.len());
    let mut stream = WindowStream::new(spec, w);
    let mut k = 0;
    for (i, b) in bars.iter().enumerate() {
        let out = stream.push(b);
        if sw.bar.get(k) == Some(&i) {
            let out = out.unwrap_or_else(|| panic!("bar {i}: batch has a sample, the stream has none"));
            let want = gather(&sw, k, nf, nc, &w);
            assert_eq!(bits(&out.fast), bits(&want.fast), "bar {i} fast");
            assert_eq!(bits(&out.slow), bits(&want.slow), "bar {i} slow");
            assert_eq!(bits(&out.context), bits(&want.context), "bar {i} context");
            assert!(out.fast.iter().chain(&out.slow).chain(&out.context).all(|x| x.is_finite()));
            k += 1;
        } else {
            assert!(out.is_none(), "bar {i}: the stream is ready but the batch has no sample");
        }
    }
    assert_eq!(k, sw.bar.len());
}

#[test]
fn no_look_ahead_changing_later_bars_leaves_inputs_at_t() {
    let spec = FeatureSpec::default();
    let w = wspec();
    let bars = real_bars("MSFT");
    let base = build(&spec, &w, &bars);
    let (nf, nc) = (spec.n_cols(), context_names(&spec).len());
    for t in [base.bar[0], base.bar[0] + 3, 1500, 1501, 1502, 1503, 1504] {
        let mut changed = bars.clone();
        for b in &mut changed[t + 1..] {
            b.c *= 1.7;
            b.h *= 1.9;
            b.v *= 3.0;
        }
        let other = build(&spec, &w, &changed);
        let k = base.bar.iter().position(|&i| i == t).expect("t is a sample");
        assert_eq!(other.bar[k], t);
        let (a, b) = (gather(&base, k, nf, nc, &w), gather(&other, k, nf, nc, &w));
        assert_eq!(bits(&a.fast), bits(&b.fast), "t {t}");
        assert_eq!(bits(&a.slow), bits(&b.slow), "t {t}");
        assert_eq!(bits(&a.context), bits(&b.context), "t {t}");
        // The change is visible right after t (so the test could fail).
        assert_ne!(bits(&base.fast[(t + 1) * nf..(t + 2) * nf]), bits(&other.fast[(t + 1) * nf..(t + 2) * nf]));
    }
}

#[test]
fn slow_bars_close_with_their_last_bar_and_aggregate_ohlcv() {
    let spec = FeatureSpec::default();
    let w = wspec();
    let bars = real_bars("IBM");
    let sw = build(&spec, &w, &bars);
    for (k, &i) in sw.bar.iter().enumerate() {
        assert_eq!(sw.slow_end[k], (i + 1) / w.slow_factor - 1, "bar {i}: newest slow bar closed at or before it");
    }
    let mut st = FeatureState::new(spec.clone());
    let mut row = vec![0.0f32; spec.n_cols()];
    let mut want = Vec::new();
    for c in bars.chunks_exact(w.slow_factor) {
        let h = c.iter().map(|b| b.h).fold(f64::MIN, f64::max);
        let l = c.iter().map(|b| b.l).fold(f64::MAX, f64::min);
        let v: f64 = c.iter().map(|b| b.v).sum();
        st.update_into(c[0].o, h, l, c[c.len() - 1].c, v, &mut row);
        want.extend_from_slice(&row);
    }
    assert_eq!(bits(&sw.slow), bits(&want));
}

#[test]
fn labels_look_horizon_bars_ahead() {
    let spec = FeatureSpec::default();
    let w = wspec();
    let bars = real_bars("AAPL");
    let sw = build(&spec, &w, &bars);
    let n = bars.len();
    let mut seen = [0usize; 3];
    for (k, &i) in sw.bar.iter().enumerate() {
        if i + w.horizon < n {
            let r = (bars[i + w.horizon].c / bars[i].c).ln();
            let want = if r < -0.02 {
                0
            } else if r > 0.02 {
                2
            } else {
                1
            };
            assert_eq!(sw.label[k], Some(want));
            seen[want as usize] += 1;
        } else {
            assert_eq!(sw.label[k], None, "bar {i}: its future is unknown");
        }
    }
    assert!(seen.iter().all(|&s| s > 100), "all three classes occur: {seen:?}");
    assert_eq!(label(100.0, 100.0, &w), 1);
    assert_eq!(label(100.0, 110.0, &w), 2);
    assert_eq!(label(100.0, 90.0, &w), 0);
}

#[test]
fn time_split_is_chronological_with_a_gap_in_time() {
    // Two symbols on the same 100 days, interleaved.
    let times: Vec<i64> = (0..100).flat_map(|d| [d, d]).collect();
    let (tr, va, te) = time_split(&times, 0.6, 0.2, 5);
    let t = |v: &[i64]| v.iter().map(|&i| times[i as usize]).collect::<Vec<_>>();
    assert_eq!(tr.len(), 120);
    assert_eq!((t(&tr).into_iter().max(), t(&va).into_iter().min()), (Some(59), Some(65)));
    assert_eq!((t(&va).into_iter().max(), t(&te).into_iter().min()), (Some(79), Some(85)));
    assert_eq!(te.len(), 30);
}

#[test]
fn context_names_match_the_vector() {
    let spec = FeatureSpec::default();
    let names = context_names(&spec);
    assert_eq!(names, ["fast.vol_20", "slow.vol_20", "fast.rsi_14", "slow.rsi_14", "slow_phase"]);
    let mut st = WindowState::new(spec, wspec());
    let bars = real_bars("AAPL");
    for b in &bars[..7] {
        st.step(b);
    }
    assert_eq!(st.context().len(), names.len());
    assert_eq!(st.context()[4], 2.0 / 5.0, "two bars into the second slow bar");
}

#[test]
fn bad_window_keys_are_refused_by_name() {
    use crate::config::LstmConfig;
    let ok = LstmConfig::default();
    assert!(ok.validate().is_ok());
    let cases: [(LstmConfig, &str); 4] = [
        (LstmConfig { slow_factor: 1, ..ok.clone() }, "lstm.slow_factor"),
        (LstmConfig { fast_len: 0, ..ok.clone() }, "lstm.fast_len"),
        (LstmConfig { up_threshold: f64::NAN, ..ok.clone() }, "lstm.up_threshold"),
        (LstmConfig { down_threshold: 0.0, up_threshold: 0.0, ..ok.clone() }, "lstm.down_threshold"),
    ];
    for (c, key) in cases {
        let e = c.validate().expect_err(key).to_string();
        assert!(e.contains(key), "{e}");
    }
}

#[test]
fn first_ready_bar_is_where_real_data_gives_its_first_sample() {
    let spec = FeatureSpec::default();
    let bars = real_bars("AAPL");
    for w in [wspec(), crate::config::LstmConfig::default().window_spec()] {
        let first = build(&spec, &w, &bars).bar[0];
        assert_eq!(first_ready_bar(&spec, &w), first, "{w:?}");
        assert!(first >= spec.warmup() + w.fast_len - 2, "{first}");
    }
}
