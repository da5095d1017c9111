//! The direction classifier as ONNX: two LSTM branches (fast and slow bars, last hidden state each) and a
//! dense branch (context features), concatenated into a dense head whose 3 logits (down, flat, up) go
//! through a softmax. Weights arrive in PyTorch's layout and gate order (i, f, g, o) and are reordered to
//! ONNX's (i, o, f, c); PyTorch's two bias vectors become ONNX's `B = [Wb; Rb]`.

use super::{Activation, Attr, Dense, Dim, GraphBuilder, OnnxError, encode};

/// One single-direction LSTM layer in PyTorch's layout: `w_ih` `[4H][I]`, `w_hh` `[4H][H]`, biases `[4H]`,
/// gate blocks in the order i, f, g, o.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LstmLayer {
    pub input_size: usize,
    pub hidden: usize,
    pub w_ih: Vec<f32>,
    pub w_hh: Vec<f32>,
    pub b_ih: Vec<f32>,
    pub b_hh: Vec<f32>,
}

/// ONNX block `k` (i, o, f, c) comes from PyTorch block `PT_BLOCK[k]` (i, f, g, o).
const PT_BLOCK: [usize; 4] = [0, 3, 1, 2];

#[cfg(test)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl LstmLayer {
    pub(crate) fn check(&self, what: &str) -> Result<(), OnnxError> {
        let (h, i) = (self.hidden, self.input_size);
        if self.w_ih.len() != 4 * h * i
            || self.w_hh.len() != 4 * h * h
            || self.b_ih.len() != 4 * h
            || self.b_hh.len() != 4 * h
        {
            return Err(OnnxError::Shape(format!("{what}: LSTM weights do not match hidden {h}, input {i}")));
        }
        Ok(())
    }

    /// The reference forward pass over one sequence `[T][I]` (row-major); returns the last hidden state.
    #[cfg(test)]
    pub(crate) fn forward_last(&self, seq: &[f32]) -> Vec<f32> {
        let (h, n_in) = (self.hidden, self.input_size);
        let mut hs = vec![0.0f32; h];
        let mut cs = vec![0.0f32; h];
        for x in seq.chunks(n_in) {
            let gate = |blk: usize, j: usize, hs: &[f32]| {
                let r = blk * h + j;
                let wx: f32 = self.w_ih[r * n_in..(r + 1) * n_in].iter().zip(x).map(|(w, v)| w * v).sum();
                let wh: f32 = self.w_hh[r * h..(r + 1) * h].iter().zip(hs).map(|(w, v)| w * v).sum();
                wx + wh + self.b_ih[r] + self.b_hh[r]
            };
            let mut next_h = vec![0.0f32; h];
            for j in 0..h {
                let i = sigmoid(gate(0, j, &hs));
                let f = sigmoid(gate(1, j, &hs));
                let g = gate(2, j, &hs).tanh();
                let o = sigmoid(gate(3, j, &hs));
                cs[j] = f * cs[j] + i * g;
                next_h[j] = o * cs[j].tanh();
            }
            hs = next_h;
        }
        hs
    }

    fn reorder(&self, m: &[f32], cols: usize) -> Vec<f32> {
        let blk = self.hidden * cols;
        PT_BLOCK.iter().flat_map(|&b| m[b * blk..(b + 1) * blk].iter().copied()).collect()
    }

    /// Adds the LSTM over `x` `[batch, T, I]` and returns its last hidden state `[batch, H]`.
    pub(crate) fn add_to_graph(&self, g: &mut GraphBuilder, x: &str, what: &str) -> Result<String, OnnxError> {
        self.check(what)?;
        let (h, i) = (self.hidden as i64, self.input_size as i64);
        let w = g.constant_f32(&format!("{what}_W"), &[1, 4 * h, i], &self.reorder(&self.w_ih, self.input_size))?;
        let r = g.constant_f32(&format!("{what}_R"), &[1, 4 * h, h], &self.reorder(&self.w_hh, self.hidden))?;
        let mut bias = self.reorder(&self.b_ih, 1);
        bias.extend(self.reorder(&self.b_hh, 1));
        let b = g.constant_f32(&format!("{what}_B"), &[1, 8 * h], &bias)?;
        // ONNX LSTM wants [T, batch, I].
        let xt = g.op("Transpose", &[x], &[("perm", Attr::Ints(vec![1, 0, 2]))]);
        let (y, yh) = (g.fresh(&format!("{what}_Y")), g.fresh(&format!("{what}_Yh")));
        g.node("LSTM", &[&xt, &w, &r, &b], &[&y, &yh], &[("hidden_size", Attr::Int(h))]);
        let axes = g.constant_i64("axes0", &[1], &[0]);
        Ok(g.op("Squeeze", &[&yh, &axes], &[]))
    }
}

/// The whole classifier.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LstmClassifier {
    pub fast: LstmLayer,
    pub fast_len: usize,
    pub slow: LstmLayer,
    pub slow_len: usize,
    /// Dense branch over the context vector, each layer followed by `activation`.
    pub context: Vec<Dense>,
    pub context_dim: usize,
    /// Head over `[h_fast, h_slow, context]`: activation between layers, none after the last.
    pub head: Vec<Dense>,
    pub activation: Activation,
}

impl LstmClassifier {
    pub(crate) fn classes(&self) -> usize {
        self.head.last().map(|l| l.out_dim).unwrap_or(0)
    }

    pub(crate) fn validate(&self) -> Result<(), OnnxError> {
        self.fast.check("fast")?;
        self.slow.check("slow")?;
        let mut dim = self.context_dim;
        for (i, l) in self.context.iter().enumerate() {
            l.check(&format!("context {i}"))?;
            if l.in_dim != dim {
                return Err(OnnxError::Shape(format!("context layer {i} takes {} inputs but gets {dim}", l.in_dim)));
            }
            dim = l.out_dim;
        }
        let mut dim = self.fast.hidden + self.slow.hidden + dim;
        if self.head.is_empty() {
            return Err(OnnxError::Shape("the head has no layers".into()));
        }
        for (i, l) in self.head.iter().enumerate() {
            l.check(&format!("head {i}"))?;
            if l.in_dim != dim {
                return Err(OnnxError::Shape(format!("head layer {i} takes {} inputs but gets {dim}", l.in_dim)));
            }
            dim = l.out_dim;
        }
        Ok(())
    }

    /// Reference forward: class probabilities for one sample.
    #[cfg(test)]
    pub(crate) fn forward(&self, x_fast: &[f32], x_slow: &[f32], x_context: &[f32]) -> Vec<f32> {
        let mut z = self.fast.forward_last(x_fast);
        z.extend(self.slow.forward_last(x_slow));
        let mut c = x_context.to_vec();
        for l in &self.context {
            c = l.forward(&c).into_iter().map(|v| self.activation.apply(v)).collect();
        }
        z.extend(c);
        for (i, l) in self.head.iter().enumerate() {
            z = l.forward(&z);
            if i + 1 < self.head.len() {
                z = z.into_iter().map(|v| self.activation.apply(v)).collect();
            }
        }
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = z.iter().map(|v| (v - m).exp()).collect();
        let s: f32 = e.iter().sum();
        e.into_iter().map(|v| v / s).collect()
    }

    /// Inputs `x_fast` `[batch, fast_len, I_fast]`, `x_slow` `[batch, slow_len, I_slow]`, `x_context`
    /// `[batch, context_dim]`; output `probs` `[batch, classes]`.
    pub(crate) fn to_onnx(&self, metadata: &[(&str, &str)]) -> Result<Vec<u8>, OnnxError> {
        self.validate()?;
        let mut g = GraphBuilder::new("tradebot_lstm_classifier");
        let fixed = |n: usize| Dim::Fixed(n as i64);
        g.input("x_fast", &[Dim::batch(), fixed(self.fast_len), fixed(self.fast.input_size)]);
        g.input("x_slow", &[Dim::batch(), fixed(self.slow_len), fixed(self.slow.input_size)]);
        g.input("x_context", &[Dim::batch(), fixed(self.context_dim)]);
        let hf = self.fast.add_to_graph(&mut g, "x_fast", "fast")?;
        let hs = self.slow.add_to_graph(&mut g, "x_slow", "slow")?;
        let mut c = "x_context".to_string();
        for (i, l) in self.context.iter().enumerate() {
            let z = l.add_to_graph(&mut g, &c, &format!("ctx{i}"))?;
            c = g.op(self.activation.op(), &[&z], &[]);
        }
        let mut z = g.op("Concat", &[&hf, &hs, &c], &[("axis", Attr::Int(1))]);
        for (i, l) in self.head.iter().enumerate() {
            z = l.add_to_graph(&mut g, &z, &format!("head{i}"))?;
            if i + 1 < self.head.len() {
                z = g.op(self.activation.op(), &[&z], &[]);
            }
        }
        g.node("Softmax", &[&z], &["probs"], &[("axis", Attr::Int(1))]);
        g.output("probs", &[Dim::batch(), fixed(self.classes())]);
        Ok(encode(&g.finish(metadata)))
    }
}
