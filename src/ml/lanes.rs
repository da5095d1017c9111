//! Elementwise functions written so that a loop over them vectorises (branch-free, no libm call), and the
//! dispatch that runs such a loop compiled for AVX2 where the CPU has it. The CPU trainers' activations
//! (the native PPO trainer's `tanh`, the native LSTM cell's gates) use them.

/// `$lanes(args)`, through its AVX2 build `$avx2` where the CPU has AVX2 (x86-64 only). The AVX2 build
/// must be `$lanes` itself compiled with `#[target_feature(enable = "avx2")]` (no `fma`: the same
/// operations, so the same bits).
macro_rules! on_avx2 {
    ($avx2:ident, $lanes:ident, ($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above; the AVX2 builds need nothing else.
            #[allow(unsafe_code)]
            return unsafe { $avx2($($arg),*) };
        }
        $lanes($($arg),*)
    }};
}
pub(crate) use on_avx2;

/// `e^y` for `y <= 0` (from -87.3 on; below that, `e^-87.3`): the exponential range-reduced by powers of
/// two (Cody and Waite's split of ln 2) and a degree-6 Taylor polynomial on `|r| <= ln(2)/2`, its relative
/// error under 2e-7.
#[inline(always)]
fn exp_nonpositive(y: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding and subtracting it rounds to an integer
    // 2^-126 is the smallest normal scale `ki` below may build.
    let y = y.max(-87.3);
    let k = (y * LOG2E + ROUND) - ROUND;
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // `k` as an integer read off the rounded sum's bits (its ulp is 1 there): `k as i32` is the same
    // value but compiles to one scalar conversion per lane, which kept loops from vectorising.
    let ki = (y * LOG2E + ROUND).to_bits() as i32 - ROUND.to_bits() as i32;
    p * f32::from_bits(((ki + 127) as u32) << 23)
}

/// `tanh(x)` as `sign(x) (1 - e) / (1 + e)` with `e = exp(-2|x|)`: absolute error below 3e-7; NaN stays NaN.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let a = x.abs().min(9.0); // tanh(9) is 1 in f32
    let e = exp_nonpositive(-2.0 * a);
    let t = ((1.0 - e) / (1.0 + e)).copysign(x);
    if x.is_nan() { x } else { t }
}

/// The logistic function `1 / (1 + e^-x)`, from `e = exp(-|x|)` on either side (`e / (1 + e)` for a
/// negative `x`), so that neither side overflows: relative error below 3.4e-7 (the largest over every
/// f32 from -200 to 200 whose value is a normal f32: 3.39e-7); NaN stays NaN.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    let e = exp_nonpositive(-x.abs());
    let s = (if x >= 0.0 { 1.0 } else { e }) / (1.0 + e);
    if x.is_nan() { x } else { s }
}

#[cfg(test)]
mod tests {
    /// Against f64 over a fine grid, the edges and NaN.
    #[test]
    fn sigmoid_is_within_3_4e_7_of_f64_relatively_and_keeps_nan() {
        let mut xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 5e-4).collect();
        xs.extend([1e-30, -1e-30, 0.0, -0.0, 87.0, -87.0, 88.0, -88.0, 1e4, -1e4, f32::MAX, f32::MIN]);
        for x in xs {
            let want = 1.0 / (1.0 + (-f64::from(x)).exp());
            let got = f64::from(super::sigmoid(x));
            // Below e^-87.3 the result is held at that value's: absolute error under 2e-38 there.
            assert!((got - want).abs() <= 3.4e-7 * want + 2e-38, "sigmoid({x}) = {got}, want {want}");
        }
        assert!(super::sigmoid(f32::INFINITY) == 1.0 && super::sigmoid(f32::NEG_INFINITY) < 1e-37);
        assert!(super::sigmoid(f32::NAN).is_nan() && super::tanh(f32::NAN).is_nan());
    }
}
