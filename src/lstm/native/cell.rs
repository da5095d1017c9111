//! The LSTM cell's elementwise work for one time step over a batch, forward and backward, in libtorch's
//! gate order (input, forget, cell, output). Each sequence's row runs compiled for AVX2 where the CPU has
//! it (the same operations, so the same bits) and vectorises over the hidden units; a row is a call of
//! its own so that its slices are known not to overlap (in one loop over the batch they were not, and the
//! loop ran a lane at a time).

use crate::ml::lanes::{on_avx2, sigmoid, tanh};

/// One step forward: `gates` `[B][4H]` (the pre-activations, replaced by the activations `i, f, g, o`),
/// `c_prev` `[B][H]`; writes `c = f c_prev + i g` `[B][H]` and `h = o tanh(c)`, `B` rows of `H` in `h.0`
/// `h.1` apart.
pub(super) fn forward(gates: &mut [f32], c_prev: &[f32], c: &mut [f32], h: (&mut [f32], usize), hidden: usize) {
    forward_with(forward_row, gates, c_prev, c, h, hidden)
}

/// One step backward: from the step's activations `gates` `[B][4H]`, `c_prev` and `c` `[B][H]`, the
/// gradient `dh` of its hidden state and `dc` of its cell state (replaced by the previous cell state's),
/// writes the gradient of its gate pre-activations to `dgates` `[B][4H]`.
pub(super) fn backward(
    gates: &[f32],
    c_prev: &[f32],
    c: &[f32],
    dh: &[f32],
    dc: &mut [f32],
    dgates: &mut [f32],
    hidden: usize,
) {
    backward_with(backward_row, (gates, c_prev, c, dh), dc, dgates, hidden)
}

type ForwardRow = fn(Gates<&mut [f32]>, &[f32], &mut [f32], &mut [f32]);
type BackwardRow = fn(Gates<&[f32]>, &[f32], &[f32], &[f32], &mut [f32], Gates<&mut [f32]>);

/// `forward` with `row` for each sequence's row.
fn forward_with(
    row: ForwardRow,
    gates: &mut [f32],
    c_prev: &[f32],
    c: &mut [f32],
    (h, h_stride): (&mut [f32], usize),
    hidden: usize,
) {
    let states = c_prev.chunks_exact(hidden).zip(c.chunks_exact_mut(hidden).zip(h.chunks_mut(h_stride)));
    for (g, (c_prev, (c, h))) in gates.chunks_exact_mut(4 * hidden).zip(states) {
        row(Gates::split_mut(g, hidden), c_prev, c, &mut h[..hidden]);
    }
}

/// `backward` with `row` for each sequence's row; `(gates, c_prev, c, dh)` as `backward` takes them.
fn backward_with(
    row: BackwardRow,
    (gates, c_prev, c, dh): (&[f32], &[f32], &[f32], &[f32]),
    dc: &mut [f32],
    dgates: &mut [f32],
    hidden: usize,
) {
    let states = c_prev.chunks_exact(hidden).zip(c.chunks_exact(hidden)).zip(dh.chunks_exact(hidden));
    let grads = dc.chunks_exact_mut(hidden).zip(dgates.chunks_exact_mut(4 * hidden));
    for ((g, ((c_prev, c), dh)), (dc, dg)) in gates.chunks_exact(4 * hidden).zip(states).zip(grads) {
        row(Gates::split(g, hidden), c_prev, c, dh, dc, Gates::split_mut(dg, hidden));
    }
}

/// One row's four gates, each `H` long.
struct Gates<T> {
    i: T,
    f: T,
    g: T,
    o: T,
}

impl<'a> Gates<&'a [f32]> {
    fn split(row: &'a [f32], hidden: usize) -> Self {
        let (i, rest) = row.split_at(hidden);
        let (f, rest) = rest.split_at(hidden);
        let (g, o) = rest.split_at(hidden);
        Gates { i, f, g, o }
    }
}

impl<'a> Gates<&'a mut [f32]> {
    fn split_mut(row: &'a mut [f32], hidden: usize) -> Self {
        let (i, rest) = row.split_at_mut(hidden);
        let (f, rest) = rest.split_at_mut(hidden);
        let (g, o) = rest.split_at_mut(hidden);
        Gates { i, f, g, o }
    }
}

fn forward_row(g: Gates<&mut [f32]>, c_prev: &[f32], c: &mut [f32], h: &mut [f32]) {
    on_avx2!(forward_row_avx2, forward_row_lanes, (g, c_prev, c, h))
}

fn backward_row(g: Gates<&[f32]>, c_prev: &[f32], c: &[f32], dh: &[f32], dc: &mut [f32], d: Gates<&mut [f32]>) {
    on_avx2!(backward_row_avx2, backward_row_lanes, (g, c_prev, c, dh, dc, d))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn forward_row_avx2(g: Gates<&mut [f32]>, c_prev: &[f32], c: &mut [f32], h: &mut [f32]) {
    forward_row_lanes(g, c_prev, c, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn backward_row_avx2(g: Gates<&[f32]>, c_prev: &[f32], c: &[f32], dh: &[f32], dc: &mut [f32], d: Gates<&mut [f32]>) {
    backward_row_lanes(g, c_prev, c, dh, dc, d)
}

#[inline(always)]
fn forward_row_lanes(g: Gates<&mut [f32]>, c_prev: &[f32], c: &mut [f32], h: &mut [f32]) {
    let n = c_prev.len();
    // Every slice `n` long where the compiler sees it: no bounds checks in the loop.
    let (gi, gf, gg, go) = (&mut g.i[..n], &mut g.f[..n], &mut g.g[..n], &mut g.o[..n]);
    let (c, h) = (&mut c[..n], &mut h[..n]);
    for j in 0..n {
        let (i, f, g, o) = (sigmoid(gi[j]), sigmoid(gf[j]), tanh(gg[j]), sigmoid(go[j]));
        (gi[j], gf[j], gg[j], go[j]) = (i, f, g, o);
        let cell = f * c_prev[j] + i * g;
        c[j] = cell;
        h[j] = o * tanh(cell);
    }
}

#[inline(always)]
fn backward_row_lanes(g: Gates<&[f32]>, c_prev: &[f32], c: &[f32], dh: &[f32], dc: &mut [f32], d: Gates<&mut [f32]>) {
    let n = c_prev.len();
    let (gi, gf, gg, go) = (&g.i[..n], &g.f[..n], &g.g[..n], &g.o[..n]);
    let (di, df, dg, d_o) = (&mut d.i[..n], &mut d.f[..n], &mut d.g[..n], &mut d.o[..n]);
    let (c, dh, dc) = (&c[..n], &dh[..n], &mut dc[..n]);
    for j in 0..n {
        let (i, f, g, o) = (gi[j], gf[j], gg[j], go[j]);
        let tc = tanh(c[j]);
        let d_cell = dc[j] + dh[j] * o * (1.0 - tc * tc);
        di[j] = d_cell * g * i * (1.0 - i);
        df[j] = d_cell * c_prev[j] * f * (1.0 - f);
        dg[j] = d_cell * i * (1.0 - g * g);
        d_o[j] = dh[j] * tc * o * (1.0 - o);
        dc[j] = d_cell * f;
    }
}

#[cfg(test)]
mod tests {
    /// The AVX2 builds give the baseline build's bits.
    #[test]
    fn each_step_is_the_same_bits_eight_lanes_wide_as_four() {
        let (batch, hidden) = (5, 19);
        let wave = |n: usize, k: f32| (0..n).map(|i| ((i as f32) * k).sin() * 3.0).collect::<Vec<f32>>();
        let (gates, c_prev) = (wave(batch * 4 * hidden, 0.37), wave(batch * hidden, 0.11));
        let (dh, dc) = (wave(batch * hidden, 0.23), wave(batch * hidden, 0.05));
        let lanes = step(&gates, &c_prev, &dh, &dc, hidden, false);
        assert!(lanes[2].iter().any(|h| *h != 0.0), "the step computed something");
        let dispatched = step(&gates, &c_prev, &dh, &dc, hidden, true);
        let bits = |v: &[Vec<f32>; 5]| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&dispatched), bits(&lanes), "AVX2 changed the bits");
    }

    /// One step forward and back through the dispatch (`wide`) or the baseline build of each row.
    fn step(gates: &[f32], c_prev: &[f32], dh: &[f32], dc: &[f32], hidden: usize, wide: bool) -> [Vec<f32>; 5] {
        let (mut g, mut c, mut h) = (gates.to_vec(), vec![0f32; c_prev.len()], vec![0f32; c_prev.len()]);
        let (mut dc, mut dg) = (dc.to_vec(), vec![0f32; gates.len()]);
        if wide {
            super::forward(&mut g, c_prev, &mut c, (&mut h, hidden), hidden);
            super::backward(&g, c_prev, &c, dh, &mut dc, &mut dg, hidden);
        } else {
            super::forward_with(super::forward_row_lanes, &mut g, c_prev, &mut c, (&mut h, hidden), hidden);
            super::backward_with(super::backward_row_lanes, (&g, c_prev, &c, dh), &mut dc, &mut dg, hidden);
        }
        [g, c, h, dc, dg]
    }
}
