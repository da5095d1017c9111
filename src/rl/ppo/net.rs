//! The native backend's networks: where each parameter lives in the flat vector (`Layout`), and the
//! forward and backward passes of one tower (dense layers, tanh or ReLU, a linear head): GEMMs (the
//! unpacked FMA kernel of `fma_gemm`, or `ndarray`'s), a few rows' dot products and `tanh` from `lanes`.

use super::fma_gemm::{self, Mat};
use super::lanes::{few_rows, tanh_slice};
use crate::onnx::Activation;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

/// Rows of a GEMM's output per block of work.
const ROWS: usize = 64;
/// Elements per block of an element-wise pass (an activation and its derivative): the same bits however
/// the blocks are spread.
const ELEMS: usize = 16_384;

/// Fewer rows than this go through [`few_rows`] in a forward pass instead of a GEMM (the GEMM's tiles
/// are 8 rows high): a rollout's one env, or a few.
const SMALL: usize = 8;

/// `c = alpha * a·b + beta * c`, `c` row-major `a.rows × b.cols`, with `c`'s rows in blocks of [`ROWS`]
/// spread over rayon's current pool once there are two blocks or more. Whether it blocks depends on the
/// shape alone, never on the threads, and each row is computed by the same kernel over the same `k` loop in
/// any block: the result is the same bits for any thread count (tested), and equal to one unblocked GEMM.
/// On a CPU with FMA the unpacked kernel of [`fma_gemm`] computes it (`matrixmultiply`'s bits; `b` copied
/// row-major first where its rows are not contiguous), elsewhere `ndarray`'s `general_mat_mul`.
pub(super) fn gemm(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: &mut [f32]) {
    let (m, n) = (a.rows, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    let c = &mut c[..m * n];
    let fast = fma_gemm::usable(alpha, beta, a.cols);
    let copied;
    let b = if fast && b.cs != 1 {
        copied = b.to_row_major();
        Mat::row_major(&copied, b.rows, b.cols)
    } else {
        b
    };
    let one = |a: Mat<'_>, c: &mut [f32]| {
        if fast {
            fma_gemm::gemm(a, b, beta == 0.0, c);
        } else {
            general_mat_mul(alpha, &ndarray_view(a), &ndarray_view(b), beta, &mut view_mut(c, a.rows, n));
        }
    };
    if m < 2 * ROWS {
        one(a, c);
        return;
    }
    use rayon::prelude::*;
    c.par_chunks_mut(ROWS * n).enumerate().for_each(|(i, c)| one(a.rows(i * ROWS, c.len() / n), c));
}

fn ndarray_view(m: Mat<'_>) -> ArrayView2<'_, f32> {
    ArrayView2::from_shape((m.rows, m.cols).strides((m.rs, m.cs)), m.data).expect("a matrix inside its slice")
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
            few_rows(&input[..n * d.input], weight, bias, d.input, y);
        } else {
            for _ in 0..n {
                y.extend_from_slice(bias);
            }
            let w = Mat::row_major(weight, d.out, d.input);
            gemm(1.0, Mat::row_major(input, n, d.input), w.t(), 1.0, y);
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
            let g = Mat::row_major(dy, n, d.out);
            gemm(1.0, g.t(), Mat::row_major(input, n, d.input), 1.0, &mut grads[d.w..]);
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
        let w = Mat::row_major(&params[d.w..], d.out, d.input);
        gemm(1.0, Mat::row_major(dy, n, d.out), w, 0.0, dx);
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
    /// The blocked GEMM against one unblocked `general_mat_mul`, bit for bit, on 1, 2 and 3 threads, with a
    /// ragged last block: a plain product with `alpha` 0.5 (always `general_mat_mul`), the weight gradient's
    /// (a transposed `a`, overwriting) and the forward pass's (a transposed `b`, accumulating), the last two
    /// on the unpacked FMA kernel where the CPU has FMA.
    #[test]
    fn the_blocked_gemm_is_the_same_bits_on_any_thread_count() {
        use super::Mat;
        use ndarray::Array2;
        use ndarray::linalg::general_mat_mul;
        let mut rng = crate::env::rng::SplitMix64::new(9);
        let mut fill = |r: usize, c: usize| Array2::from_shape_fn((r, c), |_| (rng.next_f64() * 2.0 - 1.0) as f32);
        let (a, b, c0) = (fill(300, 37), fill(37, 53), fill(300, 53));
        let (at, bt) = (fill(37, 300), fill(53, 37));
        let mut want = c0.clone();
        general_mat_mul(0.5, &a.view(), &b.view(), 1.0, &mut want.view_mut());
        let mut want_t = Array2::<f32>::zeros((300, 53));
        general_mat_mul(1.0, &at.t(), &b.view(), 0.0, &mut want_t.view_mut());
        let mut want_bt = c0.clone();
        general_mat_mul(1.0, &a.view(), &bt.t(), 1.0, &mut want_bt.view_mut());
        fn mat(m: &Array2<f32>) -> Mat<'_> {
            Mat::row_major(m.as_slice().unwrap(), m.nrows(), m.ncols())
        }
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let (mut got, mut got_t, mut got_bt) = (c0.clone(), Array2::<f32>::zeros((300, 53)), c0.clone());
            pool.install(|| {
                super::gemm(0.5, mat(&a), mat(&b), 1.0, got.as_slice_mut().unwrap());
                super::gemm(1.0, mat(&at).t(), mat(&b), 0.0, got_t.as_slice_mut().unwrap());
                super::gemm(1.0, mat(&a), mat(&bt).t(), 1.0, got_bt.as_slice_mut().unwrap());
            });
            let bits = |m: &Array2<f32>| m.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{threads} threads");
            assert_eq!(bits(&got_t), bits(&want_t), "{threads} threads, transposed a");
            assert_eq!(bits(&got_bt), bits(&want_bt), "{threads} threads, transposed b");
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
        assert_eq!(super::super::lanes::dot(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]), 32.0, "the tail alone");
    }
}
