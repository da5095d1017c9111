//! One LSTM layer's forward and backward pass on the CPU, natively: libtorch's `lstm` (one layer, from a
//! zero state, its gate order and its two biases) as far as the last hidden state, and the gradient of
//! the layer's weights from that state's gradient. The trainer's minibatch parts (`lstm::parts`) run it
//! in place of libtorch's LSTM, whose kernels at a hidden size of a few dozen spent most of an epoch;
//! the head and the loss stay libtorch's.
//!
//! The work is laid out time-major (`[T][B][..]`), each step's input beside the hidden state it starts
//! from (`[x_t | h_t-1]`, one row per sequence): a step's gates are one GEMM of that row with the two
//! weight matrices side by side, its cell reads and writes contiguous rows, and the gradient of both
//! weight matrices is one GEMM over all steps. The GEMMs are `ndarray`'s (`matrixmultiply`); the cell's
//! elementwise work is `cell`'s.

mod cell;

use crate::onnx::lstm::LstmLayer;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

/// The gradient of a layer's weights: `w_ih`, `w_hh` and the biases' (both biases have the same one).
pub(super) struct Grads {
    pub(super) w_ih: Vec<f32>,
    pub(super) w_hh: Vec<f32>,
    pub(super) bias: Vec<f32>,
}

/// What the forward pass keeps for the backward pass (buffers reused from one minibatch to the next).
#[derive(Default)]
pub(super) struct Tape {
    batch: usize,
    len: usize,
    /// `[w_ih | w_hh]`, `[4H][I + H]`.
    w: Vec<f32>,
    /// Each step's input and the hidden state it starts from, `[T][B][I + H]` (step 0's state is zero).
    xh: Vec<f32>,
    /// The gates' activations `[T][B][4H]`.
    gates: Vec<f32>,
    /// The cell state each step starts from, `[T][B][H]` (step 0's is zero).
    c_prev: Vec<f32>,
    /// The last step's hidden and cell state, `[B][H]`.
    h_last: Vec<f32>,
    c_last: Vec<f32>,
    dgates: Vec<f32>,
    dh: Vec<f32>,
    dc: Vec<f32>,
}

/// A GEMM's operand: element `(i, j)` at `data[i * rs + j * cs]`.
struct Operand<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Operand<'a> {
    /// Row-major `[rows][cols]` at `data`, rows `rs` apart.
    fn rows(data: &'a [f32], rows: usize, cols: usize, rs: usize) -> Self {
        Operand { data, rows, cols, rs, cs: 1 }
    }

    /// The transpose of the row-major `[rows][cols]` at `data` with rows `rs` apart.
    fn t(data: &'a [f32], rows: usize, cols: usize, rs: usize) -> Self {
        Operand { data, rows: cols, cols: rows, rs: 1, cs: rs }
    }

    fn view(&self) -> Result<ArrayView2<'a, f32>, String> {
        ArrayView2::from_shape((self.rows, self.cols).strides((self.rs, self.cs)), self.data).map_err(|e| e.to_string())
    }
}

/// `c = beta c + a b` with `c` row-major `[a.rows][b.cols]`, rows `ldc` apart.
fn gemm(a: Operand<'_>, b: Operand<'_>, beta: f32, c: &mut [f32], ldc: usize) -> Result<(), String> {
    let mut cv = ArrayViewMut2::from_shape((a.rows, b.cols).strides((ldc, 1)), c).map_err(|e| e.to_string())?;
    general_mat_mul(1.0, &a.view()?, &b.view()?, beta, &mut cv);
    Ok(())
}

impl Tape {
    /// The last hidden state `[B][H]` of the batch-first sequences `x` `[B][T][I]` from a zero state.
    pub(super) fn forward(&mut self, w: &LstmLayer, x: &[f32], batch: usize, len: usize) -> Result<&[f32], String> {
        let (input, hd) = (w.input_size, w.hidden);
        let g4 = 4 * hd;
        if x.len() != batch * len * input
            || len == 0
            || input == 0
            || hd == 0
            || w.w_ih.len() != g4 * input
            || w.w_hh.len() != g4 * hd
        {
            return Err(format!(
                "native LSTM: {} inputs for {batch} sequences of {len} steps of {input}, weights {} and {} for a hidden size of {hd}",
                x.len(),
                w.w_ih.len(),
                w.w_hh.len()
            ));
        }
        (self.batch, self.len) = (batch, len);
        let (k, n) = (input + hd, batch * hd);
        self.w.clear();
        for (ih, hh) in w.w_ih.chunks_exact(input).zip(w.w_hh.chunks_exact(hd)) {
            self.w.extend_from_slice(ih);
            self.w.extend_from_slice(hh);
        }
        self.xh.resize(len * batch * k, 0.0);
        for (b, seq) in x.chunks_exact(len * input).enumerate() {
            for (t, step) in seq.chunks_exact(input).enumerate() {
                self.xh[(t * batch + b) * k..][..input].copy_from_slice(step);
            }
            self.xh[b * k + input..][..hd].fill(0.0);
        }
        self.gates.resize(len * batch * g4, 0.0);
        for row in self.gates.chunks_exact_mut(g4) {
            for ((g, bi), bh) in row.iter_mut().zip(&w.b_ih).zip(&w.b_hh) {
                *g = bi + bh;
            }
        }
        self.c_prev.resize(len * n, 0.0);
        self.c_prev[..n].fill(0.0);
        self.h_last.resize(n, 0.0);
        self.c_last.resize(n, 0.0);
        for t in 0..len {
            let gates = &mut self.gates[t * batch * g4..][..batch * g4];
            let (now, next) = self.xh.split_at_mut((t + 1) * batch * k);
            let xh = Operand::rows(&now[t * batch * k..], batch, k, k);
            gemm(xh, Operand::t(&self.w, g4, k, k), 1.0, gates, g4)?;
            let (before, after) = self.c_prev.split_at_mut((t + 1) * n);
            let c_prev = &before[t * n..];
            if t + 1 < len {
                cell::forward(gates, c_prev, &mut after[..n], (&mut next[input..], k), hd);
            } else {
                cell::forward(gates, c_prev, &mut self.c_last, (&mut self.h_last, hd), hd);
            }
        }
        Ok(&self.h_last)
    }

    /// The gradient of the weights from `dh_last`, that of the last hidden state `[B][H]` the last
    /// `forward` returned (the cell state's is zero: the layer hands on only its hidden state).
    pub(super) fn backward(&mut self, w: &LstmLayer, dh_last: &[f32]) -> Result<Grads, String> {
        let (batch, len, input, hd) = (self.batch, self.len, w.input_size, w.hidden);
        let (g4, n) = (4 * hd, batch * hd);
        if dh_last.len() != n || self.h_last.len() != n || self.xh.len() != len * batch * (input + hd) {
            return Err(format!("native LSTM: a gradient of {} for {batch} states of {hd}", dh_last.len()));
        }
        self.dgates.resize(len * batch * g4, 0.0);
        self.dh.clear();
        self.dh.extend_from_slice(dh_last);
        self.dc.clear();
        self.dc.resize(n, 0.0);
        let k = input + hd;
        for t in (0..len).rev() {
            let c = if t + 1 < len { &self.c_prev[(t + 1) * n..][..n] } else { &self.c_last[..] };
            let gates = &self.gates[t * batch * g4..][..batch * g4];
            let dgates = &mut self.dgates[t * batch * g4..][..batch * g4];
            cell::backward(gates, &self.c_prev[t * n..][..n], c, &self.dh, &mut self.dc, dgates, hd);
            if t > 0 {
                let w_hh = Operand::rows(&self.w[input..], g4, hd, k);
                gemm(Operand::rows(dgates, batch, g4, g4), w_hh, 0.0, &mut self.dh, hd)?;
            }
        }
        let rows = len * batch;
        let mut dw = vec![0.0; g4 * k];
        gemm(Operand::t(&self.dgates, rows, g4, g4), Operand::rows(&self.xh, rows, k, k), 0.0, &mut dw, k)?;
        let mut grads =
            Grads { w_ih: Vec::with_capacity(g4 * input), w_hh: Vec::with_capacity(g4 * hd), bias: vec![0.0; g4] };
        for row in dw.chunks_exact(k) {
            grads.w_ih.extend_from_slice(&row[..input]);
            grads.w_hh.extend_from_slice(&row[input..]);
        }
        for row in self.dgates.chunks_exact(g4) {
            for (s, d) in grads.bias.iter_mut().zip(row) {
                *s += d;
            }
        }
        Ok(grads)
    }
}

#[cfg(test)]
mod tests;
