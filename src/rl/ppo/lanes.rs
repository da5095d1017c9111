//! The native trainer's loops that run compiled for AVX2 where the CPU has it, with the bits of their
//! baseline build (x86-64's four lanes): `tanh` over a slice, a dense layer over a few rows (the
//! rollout's forward passes) and Adam's step over the flat parameters. The same operations in the same
//! order and no fused multiply-add, so a model trains to the same weights on either build (tested).

use crate::ml::lanes::on_avx2;

/// A dense layer over a few rows of `width` inputs, `bias + row·w` for each row and weight row, appended
/// to `y`. On a CPU with AVX2 it runs compiled for it: [`dot`]'s eight lanes in one register instead of
/// two, the same operations in the same order (no fused multiply-add), so the same bits (tested).
pub(super) fn few_rows(input: &[f32], weight: &[f32], bias: &[f32], width: usize, y: &mut Vec<f32>) {
    on_avx2!(few_rows_avx2, few_rows_lanes, (input, weight, bias, width, y))
}

/// `few_rows_lanes` with [`dot`]'s eight lanes in one AVX2 register (a multiply, then an add: no fused
/// multiply-add) and four weight rows at a time, each summed as `dot` sums it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
fn few_rows_avx2(input: &[f32], weight: &[f32], bias: &[f32], width: usize, y: &mut Vec<f32>) {
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let chunks = width / 8;
    let rows = weight.len() / width.max(1);
    for x in input.chunks_exact(width) {
        let mut o = 0;
        while o < rows {
            let take = (rows - o).min(4);
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut lanes = [[0f32; 8]; 4];
            // SAFETY: AVX2 is enabled on this function; every load reads 8 floats at `8 c < 8 chunks <= width`
            // of `x` or of a weight row `o + r < rows` (`weight` holds `rows * width`), and each store writes
            // 8 floats into `lanes`.
            unsafe {
                for c in 0..chunks {
                    let xv = _mm256_loadu_ps(x.as_ptr().add(8 * c));
                    for (r, acc) in acc.iter_mut().enumerate().take(take) {
                        let wv = _mm256_loadu_ps(weight.as_ptr().add((o + r) * width + 8 * c));
                        *acc = _mm256_add_ps(*acc, _mm256_mul_ps(xv, wv));
                    }
                }
                for (l, acc) in lanes.iter_mut().zip(&acc) {
                    _mm256_storeu_ps(l.as_mut_ptr(), *acc);
                }
            }
            for (r, l) in lanes.iter().enumerate().take(take) {
                let w = &weight[(o + r) * width..][..width];
                let s = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
                let dot = x[8 * chunks..].iter().zip(&w[8 * chunks..]).fold(s, |s, (x, y)| s + x * y);
                y.push(bias[o + r] + dot);
            }
            o += take;
        }
    }
}

#[inline(always)]
fn few_rows_lanes(input: &[f32], weight: &[f32], bias: &[f32], width: usize, y: &mut Vec<f32>) {
    for row in input.chunks_exact(width) {
        for (w, b) in weight.chunks_exact(width).zip(bias) {
            y.push(b + dot(row, w));
        }
    }
}

/// `a·b` in eight lanes (so that it vectorises), then the lanes pairwise and the tail in order.
#[inline(always)]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = ca.remainder().iter().zip(cb.remainder());
    let mut acc = [0f32; 8];
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    tail.fold(s, |s, (x, y)| s + x * y)
}

/// `tanh` over a slice. libm's `tanhf` (through `expm1f`) took over 40 % of a minibatch; this one
/// ([`crate::ml::lanes::tanh`]) is branch-free so the loop vectorises: `sign(x) (1 - e) / (1 + e)` with
/// `e = exp(-2|x|)`. Absolute error below 3e-7 (tested against f64); NaN stays NaN.
///
/// On a CPU with AVX2 the same loop runs eight lanes wide instead of four (the build targets baseline
/// x86-64): the same operations in the same order, no fused multiply-add, so the same bits (tested).
pub(super) fn tanh_slice(v: &mut [f32]) {
    on_avx2!(tanh_avx2, tanh_lanes, (v))
}

/// `tanh_lanes` compiled for AVX2 (eight f32 lanes; `fma` is not enabled, so no rounding changes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn tanh_avx2(v: &mut [f32]) {
    tanh_lanes(v)
}

/// The loop of `tanh_slice`, inlined into each build of it.
#[inline(always)]
fn tanh_lanes(v: &mut [f32]) {
    for x in v.iter_mut() {
        *x = crate::ml::lanes::tanh(*x);
    }
}

/// One Adam step's constants (libtorch's formula, in f32).
pub(super) struct AdamStep {
    pub b1: f32,
    pub b2: f32,
    pub eps: f32,
    pub sqrt_bc2: f32,
    pub step_size: f32,
}

/// Adam over the flat parameters. On a CPU with AVX2 the loop runs compiled for it (eight lanes of its
/// divisions and square roots instead of four; no fused multiply-add), so the same bits (tested).
pub(super) fn adam(s: &AdamStep, params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32]) {
    on_avx2!(adam_avx2, adam_lanes, (s, params, grads, m, v))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn adam_avx2(s: &AdamStep, params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32]) {
    adam_lanes(s, params, grads, m, v)
}

#[inline(always)]
fn adam_lanes(s: &AdamStep, params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32]) {
    for (((p, g), m), v) in params.iter_mut().zip(grads).zip(m).zip(v) {
        *m = *m * s.b1 + g * (1.0 - s.b1);
        *v = *v * s.b2 + g * g * (1.0 - s.b2);
        *p -= s.step_size * *m / (v.sqrt() / s.sqrt_bc2 + s.eps);
    }
}

#[cfg(test)]
mod tests {
    /// The AVX2 build of a few rows' dense layer gives the baseline build's bits.
    #[test]
    fn few_rows_are_the_same_bits_eight_lanes_wide_as_four() {
        let mut rng = crate::env::rng::SplitMix64::new(5);
        let mut fill = |n: usize| (0..n).map(|_| (rng.next_f64() * 4.0 - 2.0) as f32).collect::<Vec<_>>();
        // 62 weight rows: fifteen groups of four and a pair; 123 inputs: fifteen chunks of eight and a tail.
        let (input, weight, bias) = (fill(3 * 123), fill(62 * 123), fill(62));
        let mut lanes = Vec::new();
        super::few_rows_lanes(&input, &weight, &bias, 123, &mut lanes);
        let mut dispatched = Vec::new();
        super::few_rows(&input, &weight, &bias, 123, &mut dispatched);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(lanes.len(), 3 * 62);
        assert_eq!(bits(&dispatched), bits(&lanes));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut wide = Vec::new();
            // SAFETY: the CPU has AVX2 (checked just above).
            #[allow(unsafe_code)]
            unsafe {
                super::few_rows_avx2(&input, &weight, &bias, 123, &mut wide)
            };
            assert_eq!(bits(&wide), bits(&lanes), "AVX2 changed the bits");
        }
    }

    /// The AVX2 build of `tanh` gives the baseline build's bits, on every kind of input.
    #[test]
    fn tanh_is_the_same_bits_eight_lanes_wide_as_four() {
        let mut xs: Vec<f32> =
            (0..20_000).map(|i| ((i as f32) * 0.001_37 - 13.7) * ((i % 7) as f32 * 0.3 + 0.1)).collect();
        xs.extend([
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            8.999,
            9.0,
            9.001,
            -9.0,
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ]);
        xs.extend((0..1000u32).map(|i| f32::from_bits(0x3f80_0000 ^ (i.wrapping_mul(2_654_435_761u32) >> 9))));
        let mut lanes = xs.clone();
        super::tanh_lanes(&mut lanes);
        let mut dispatched = xs.clone();
        super::tanh_slice(&mut dispatched);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&dispatched), bits(&lanes));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut wide = xs.clone();
            // SAFETY: the CPU has AVX2 (checked just above).
            #[allow(unsafe_code)]
            unsafe {
                super::tanh_avx2(&mut wide)
            };
            assert_eq!(bits(&wide), bits(&lanes), "AVX2 changed the bits");
        }
    }

    /// Reading `k` off the sum's bits gives the bits `k as i32` gave (the formula before it), on every
    /// exponent `k` takes and the edges.
    #[test]
    fn tanh_keeps_the_bits_of_its_cast_formula() {
        fn with_cast(x: f32) -> f32 {
            const ROUND: f32 = 12_582_912.0;
            let a = x.abs().min(9.0);
            let y = -2.0 * a;
            let k = (y * std::f32::consts::LOG2_E + ROUND) - ROUND;
            let r = (y - k * 0.693_145_75) - k * 1.428_606_8e-6;
            let p = 1.0
                + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
            let e = p * f32::from_bits(((k as i32 + 127) as u32) << 23);
            let t = ((1.0 - e) / (1.0 + e)).copysign(x);
            if x.is_nan() { x } else { t }
        }
        let mut xs: Vec<f32> = (-1_000_000..=1_000_000).map(|i| i as f32 * 1e-5).collect();
        xs.extend((0..100_000u32).map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761))));
        xs.extend([0.0, -0.0, 9.0, -9.0, 8.999_999, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        let mut got = xs.clone();
        super::tanh_slice(&mut got);
        for (x, g) in xs.iter().zip(&got) {
            assert_eq!(g.to_bits(), with_cast(*x).to_bits(), "tanh({x})");
        }
    }

    #[test]
    fn tanh_slice_is_within_3e_7_of_f64_and_keeps_nan() {
        let mut xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 1e-4).collect();
        xs.extend([1e-30, -1e-7, 8.99, 9.5, -40.0, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY]);
        let mut got = xs.clone();
        super::tanh_slice(&mut got);
        let worst = xs.iter().zip(&got).map(|(x, g)| ((*x as f64).tanh() - *g as f64).abs()).fold(0.0, f64::max);
        assert!(worst < 3e-7, "worst absolute error {worst}");
        assert!(got.iter().all(|g| g.abs() <= 1.0));
        let mut nan = [f32::NAN, 0.5];
        super::tanh_slice(&mut nan);
        assert!(nan[0].is_nan() && (nan[1] - 0.5f32.tanh()).abs() < 3e-7);
    }

    /// The AVX2 build of Adam's loop gives the baseline build's bits, moments and parameters alike.
    #[test]
    fn adam_is_the_same_bits_eight_lanes_wide_as_four() {
        use super::{AdamStep, adam, adam_lanes};
        let s = AdamStep { b1: 0.9, b2: 0.999, eps: 1e-5, sqrt_bc2: 0.0447, step_size: 3e-3 };
        let start: Vec<f32> = (0..1003).map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-2).collect();
        let grads: Vec<f32> = (0..1003).map(|i| ((i * 53 % 97) as f32 - 48.0) * 1e-3).collect();
        let run = |avx2: bool| {
            let (mut p, mut m, mut v) =
                (start.clone(), start.iter().map(|x| x * 0.1).collect::<Vec<_>>(), vec![1e-4f32; 1003]);
            for _ in 0..3 {
                if avx2 {
                    adam(&s, &mut p, &grads, &mut m, &mut v);
                } else {
                    adam_lanes(&s, &mut p, &grads, &mut m, &mut v);
                }
            }
            [p, m, v].map(|x| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        };
        let (base, dispatched) = (run(false), run(true));
        assert_ne!(base[0], start.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "the step moved nothing");
        assert_eq!(dispatched, base);
    }
}
