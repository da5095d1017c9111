//! The native backend's networks: where each parameter lives in the flat vector (`Layout`), and the
//! forward and backward passes of one tower (dense layers, tanh or ReLU, a linear head) over `ndarray`
//! GEMMs, with a vectorising `tanh`.

use crate::onnx::Activation;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, Axis};

/// Rows of a GEMM's output per block of work.
const ROWS: usize = 64;
/// Elements per block of an element-wise pass (an activation and its derivative): the same bits however
/// the blocks are spread.
const ELEMS: usize = 16_384;

/// Fewer rows than this go through [`dot`] in a forward pass instead of a GEMM (the GEMM's tiles are 8
/// rows high): a rollout's one env, or a few.
const SMALL: usize = 8;

/// `a·b` in eight lanes (so that it vectorises), then the lanes pairwise and the tail in order.
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

/// `c = alpha * a·b + beta * c`, with `c`'s rows in blocks of [`ROWS`] spread over rayon's current pool
/// once there are two blocks or more. Whether it blocks depends on the shape alone, never on the threads,
/// and each row is computed by the same kernel over the same `k` loop in any block: the result is the same
/// bits for any thread count (tested), and equal to one unblocked GEMM.
pub(super) fn gemm(
    alpha: f32,
    a: &ArrayView2<'_, f32>,
    b: &ArrayView2<'_, f32>,
    beta: f32,
    c: &mut ArrayViewMut2<'_, f32>,
) {
    if c.nrows() < 2 * ROWS {
        general_mat_mul(alpha, a, b, beta, c);
        return;
    }
    use rayon::prelude::*;
    let blocks: Vec<_> = a.axis_chunks_iter(Axis(0), ROWS).zip(c.axis_chunks_iter_mut(Axis(0), ROWS)).collect();
    blocks.into_par_iter().for_each(|(a, mut c)| general_mat_mul(alpha, &a, b, beta, &mut c));
}

/// One dense layer's place in the flat parameter vector: `weight` `[out, in]` row-major (torch's layout)
/// at `w`, `bias` `[out]` at `b`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dense {
    pub input: usize,
    pub out: usize,
    pub w: usize,
    pub b: usize,
}

/// Where every parameter lives in the flat vector: actor layers and head, critic layers and head, log-std.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub actor: Vec<Dense>,
    pub critic: Vec<Dense>,
    pub log_std: usize,
    pub obs_dim: usize,
    pub act_dim: usize,
    pub len: usize,
}

impl Layout {
    pub(super) fn new(obs_dim: usize, act_dim: usize, hidden: &[i64]) -> Layout {
        let mut len = 0;
        let mut tower = |head: usize| {
            let mut layers = Vec::new();
            let mut input = obs_dim;
            let sizes: Vec<usize> = hidden.iter().map(|h| *h as usize).chain([head]).collect();
            for out in sizes {
                let w = len;
                let b = w + out * input;
                len = b + out;
                layers.push(Dense { input, out, w, b });
                input = out;
            }
            layers
        };
        let actor = tower(act_dim);
        let critic = tower(1);
        let log_std = len;
        len += act_dim;
        Layout { actor, critic, log_std, obs_dim, act_dim, len }
    }

    /// The shape of every parameter tensor, in order (weights `[out, in]`, biases `[out]`, log-std `[A]`).
    pub(super) fn shapes(&self) -> Vec<Vec<i64>> {
        let mut s = Vec::new();
        for d in self.actor.iter().chain(&self.critic) {
            s.push(vec![d.out as i64, d.input as i64]);
            s.push(vec![d.out as i64]);
        }
        s.push(vec![self.act_dim as i64]);
        s
    }
}

/// Activations of one tower (a buffer per layer; hidden ones after the activation).
#[derive(Default)]
pub(super) struct Acts(pub Vec<Vec<f32>>);

/// `tanh` over a slice. libm's `tanhf` (through `expm1f`) took over 40 % of a minibatch; this one is
/// branch-free so the loop vectorises: `sign(x) (1 - e) / (1 + e)` with `e = exp(-2|x|)`, the exponential
/// range-reduced by powers of two (Cody and Waite's split of ln 2) and a degree-6 Taylor polynomial on
/// `|r| <= ln(2)/2`. Absolute error below 3e-7 (tested against f64); NaN stays NaN.
///
/// On a CPU with AVX2 the same loop runs eight lanes wide instead of four (the build targets baseline
/// x86-64): the same operations in the same order, no fused multiply-add, so the same bits (tested).
pub(super) fn tanh_slice(v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above; `tanh_avx2` needs nothing else.
        #[allow(unsafe_code)]
        unsafe {
            tanh_avx2(v)
        };
        return;
    }
    tanh_lanes(v)
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
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding and subtracting it rounds to an integer
    for x in v.iter_mut() {
        let a = x.abs().min(9.0); // tanh(9) is 1 in f32
        let y = -2.0 * a;
        let k = (y * LOG2E + ROUND) - ROUND;
        let r = (y - k * LN2_HI) - k * LN2_LO;
        let p =
            1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
        let e = p * f32::from_bits(((k as i32 + 127) as u32) << 23);
        let t = ((1.0 - e) / (1.0 + e)).copysign(*x);
        *x = if x.is_nan() { *x } else { t };
    }
}

pub(super) fn view(x: &[f32], rows: usize, cols: usize) -> ArrayView2<'_, f32> {
    ArrayView2::from_shape((rows, cols), &x[..rows * cols]).expect("buffer sized by the layout")
}

pub(super) fn view_mut(x: &mut [f32], rows: usize, cols: usize) -> ArrayViewMut2<'_, f32> {
    ArrayViewMut2::from_shape((rows, cols), &mut x[..rows * cols]).expect("buffer sized by the layout")
}

/// Forward pass of one tower over `n` rows of `x`; the head is linear.
pub(super) fn forward(params: &[f32], tower: &[Dense], act: Activation, x: &[f32], n: usize, acts: &mut Acts) {
    acts.0.resize_with(tower.len(), Vec::new);
    for (i, d) in tower.iter().enumerate() {
        let (before, rest) = acts.0.split_at_mut(i);
        let input: &[f32] = if i == 0 { x } else { &before[i - 1] };
        let y = &mut rest[0];
        y.clear();
        let (weight, bias) = (&params[d.w..d.w + d.out * d.input], &params[d.b..d.b + d.out]);
        if n < SMALL {
            // A rollout's few rows: dot products straight off the weights' rows. A GEMM would pack the
            // weights and compute whole 8-row tiles for each call, several times this work.
            for row in input[..n * d.input].chunks_exact(d.input) {
                y.extend(weight.chunks_exact(d.input).zip(bias).map(|(w, b)| b + dot(row, w)));
            }
        } else {
            for _ in 0..n {
                y.extend_from_slice(bias);
            }
            let w = view(weight, d.out, d.input);
            gemm(1.0, &view(input, n, d.input), &w.t(), 1.0, &mut view_mut(y, n, d.out));
        }
        if i + 1 < tower.len() {
            let f = |y: &mut [f32]| match act {
                Activation::Tanh => tanh_slice(y),
                Activation::Relu => y.iter_mut().for_each(|v| *v = v.max(0.0)),
            };
            if y.len() < 2 * ELEMS {
                f(y);
            } else {
                use rayon::prelude::*;
                y.par_chunks_mut(ELEMS).for_each(f);
            }
        }
    }
}

/// Backward pass of one tower: `dy` is the gradient of the head's output (`[n * out]`); the weight and
/// bias gradients are added to `grads`. `dy` and `dx` are scratch and end up overwritten.
#[allow(clippy::too_many_arguments)]
pub(super) fn backward(
    params: &[f32],
    grads: &mut [f32],
    tower: &[Dense],
    act: Activation,
    x: &[f32],
    n: usize,
    acts: &Acts,
    dy: &mut Vec<f32>,
    dx: &mut Vec<f32>,
) {
    for i in (0..tower.len()).rev() {
        let d = tower[i];
        let input: &[f32] = if i == 0 { x } else { &acts.0[i - 1] };
        {
            let g = view(dy, n, d.out);
            gemm(1.0, &g.t(), &view(input, n, d.input), 1.0, &mut view_mut(&mut grads[d.w..], d.out, d.input));
            let gb = &mut grads[d.b..d.b + d.out];
            for row in dy[..n * d.out].chunks_exact(d.out) {
                gb.iter_mut().zip(row).for_each(|(a, b)| *a += b);
            }
        }
        if i == 0 {
            break;
        }
        dx.clear();
        dx.resize(n * d.input, 0.0);
        gemm(1.0, &view(dy, n, d.out), &view(&params[d.w..], d.out, d.input), 0.0, &mut view_mut(dx, n, d.input));
        // Through the activation of layer i - 1 (whose output is `input`).
        let f = |(dx, y): (&mut [f32], &[f32])| match act {
            Activation::Tanh => dx.iter_mut().zip(y).for_each(|(g, y)| *g *= 1.0 - y * y),
            Activation::Relu => dx.iter_mut().zip(y).for_each(|(g, y)| {
                if *y <= 0.0 {
                    *g = 0.0
                }
            }),
        };
        let input = &input[..dx.len()];
        if dx.len() < 2 * ELEMS {
            f((dx.as_mut_slice(), input));
        } else {
            use rayon::prelude::*;
            dx.par_chunks_mut(ELEMS).zip(input.par_chunks(ELEMS)).for_each(f);
        }
        std::mem::swap(dy, dx);
    }
}

#[cfg(test)]
mod tests {
    /// The blocked GEMM against one unblocked call, bit for bit, on 1, 2 and 3 threads, with a transposed
    /// operand (the weight gradient's) and a ragged last block.
    #[test]
    fn the_blocked_gemm_is_the_same_bits_on_any_thread_count() {
        use ndarray::Array2;
        use ndarray::linalg::general_mat_mul;
        let mut rng = crate::env::rng::SplitMix64::new(9);
        let mut fill = |r: usize, c: usize| Array2::from_shape_fn((r, c), |_| (rng.next_f64() * 2.0 - 1.0) as f32);
        let (a, b, c0) = (fill(300, 37), fill(37, 53), fill(300, 53));
        let at = fill(37, 300);
        let mut want = c0.clone();
        general_mat_mul(0.5, &a.view(), &b.view(), 1.0, &mut want.view_mut());
        let mut want_t = Array2::<f32>::zeros((300, 53));
        general_mat_mul(1.0, &at.t(), &b.view(), 0.0, &mut want_t.view_mut());
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let (mut got, mut got_t) = (c0.clone(), Array2::<f32>::zeros((300, 53)));
            pool.install(|| {
                super::gemm(0.5, &a.view(), &b.view(), 1.0, &mut got.view_mut());
                super::gemm(1.0, &at.t(), &b.view(), 0.0, &mut got_t.view_mut());
            });
            let bits = |m: &Array2<f32>| m.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{threads} threads");
            assert_eq!(bits(&got_t), bits(&want_t), "{threads} threads, transposed operand");
        }
    }

    /// The forward pass of a few rows (dot products) against the GEMM's for the same rows within a larger
    /// batch: the same values to f32 rounding, for every row count below and at the switch.
    #[test]
    fn a_forward_pass_of_few_rows_agrees_with_the_gemms() {
        use crate::onnx::Activation;
        let layout = super::Layout::new(61, 30, &[64, 64]);
        let mut rng = crate::env::rng::SplitMix64::new(4);
        let params: Vec<f32> = (0..layout.len).map(|_| (rng.next_f64() * 0.4 - 0.2) as f32).collect();
        let x: Vec<f32> = (0..16 * 61).map(|_| (rng.next_f64() * 4.0 - 2.0) as f32).collect();
        let mut big = super::Acts::default();
        super::forward(&params, &layout.actor, Activation::Tanh, &x, 16, &mut big);
        let want = big.0.last().unwrap();
        for n in 1..=super::SMALL {
            let mut small = super::Acts::default();
            super::forward(&params, &layout.actor, Activation::Tanh, &x[..n * 61], n, &mut small);
            let got = small.0.last().unwrap();
            assert_eq!(got.len(), n * 30);
            let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-5, "{n} rows: worst difference {worst}");
            assert!(got.iter().any(|g| g.abs() > 1e-2), "outputs all ~0: a weak test");
        }
        assert_eq!(super::dot(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]), 32.0, "the tail alone");
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
}
