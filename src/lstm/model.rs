//! The direction classifier: an LSTM over the fast window, an LSTM over the slow window (cuDNN on CUDA),
//! a dense branch over the context vector, and a dense head producing 3 logits (down, flat, up).
//! Variables live under `fast/`, `slow/`, `ctx/` and `head/`, so checkpoint keys are stable.

use super::LstmConfig;
use crate::onnx::lstm::{LstmClassifier, LstmLayer};
use crate::onnx::{Activation, Dense};
use tch::{Kind, Tensor, nn, nn::Module};

pub(crate) struct LstmNet {
    fast: Recurrent,
    slow: Recurrent,
    ctx: Vec<nn::Linear>,
    head: Vec<nn::Linear>,
    activation: Activation,
    pub dims: NetDims,
}

/// Input sizes and window lengths.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct NetDims {
    pub fast_dim: usize,
    pub fast_len: usize,
    pub slow_dim: usize,
    pub slow_len: usize,
    pub context_dim: usize,
}

fn rnn_cfg() -> nn::RNNConfig {
    nn::RNNConfig { batch_first: true, ..Default::default() }
}

/// One LSTM layer's weights as `nn::lstm` made them (its initialisation, its names `weight_ih_l0`,
/// `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0` under the layer's path, cuDNN's flattening on CUDA), held as
/// plain tensors so that a training thread can hold its own handles on them (`LstmNet::replica`).
pub(super) struct Recurrent {
    /// `[w_ih, w_hh, b_ih, b_hh]`: libtorch's order.
    weights: Vec<Tensor>,
    hidden: i64,
}

impl Recurrent {
    fn new(vs: &nn::Path, name: &str, input: i64, hidden: i64) -> Recurrent {
        let path = vs / name;
        let _ = nn::lstm(&path, input, hidden, rnn_cfg());
        let weights =
            ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"].iter().filter_map(|w| path.get(w)).collect();
        Recurrent { weights, hidden }
    }

    /// The last hidden state `[B, hidden]` of a batch-first sequence `[B, T, in]` from a zero state: the
    /// same call `nn::LSTM::seq` makes.
    fn last_hidden(&self, input: &Tensor) -> Tensor {
        let zeros =
            Tensor::zeros([1, input.size()[0], self.hidden], (self.weights[0].kind(), self.weights[0].device()));
        let c = rnn_cfg();
        let weights: Vec<&Tensor> = self.weights.iter().collect();
        let (_, h, _) = input.lstm(
            &[&zeros, &zeros],
            &weights,
            c.has_biases,
            c.num_layers,
            c.dropout,
            c.train,
            c.bidirectional,
            c.batch_first,
        );
        h.squeeze_dim(0)
    }

    fn replica(&self) -> Recurrent {
        Recurrent { weights: self.weights.iter().map(Tensor::shallow_clone).collect(), hidden: self.hidden }
    }

    /// The weights `[w_ih, w_hh, b_ih, b_hh]` (the tensors themselves, not copies).
    pub(super) fn weights(&self) -> &[Tensor] {
        &self.weights
    }

    /// A copy of the weights in host memory, as f32, for the native pass (`super::native`).
    pub(super) fn host_weights(&self) -> Result<LstmLayer, tch::TchError> {
        let host = |t: &Tensor| {
            Vec::<f32>::try_from(t.detach().to_device(tch::Device::Cpu).to_kind(Kind::Float).reshape([-1]))
        };
        let [w_ih, w_hh, b_ih, b_hh] = &self.weights[..] else {
            return Err(tch::TchError::Shape(format!("an LSTM layer of {} weights, not 4", self.weights.len())));
        };
        let hidden = self.hidden as usize;
        Ok(LstmLayer {
            input_size: w_ih.size().get(1).map_or(0, |i| *i as usize),
            hidden,
            w_ih: host(w_ih)?,
            w_hh: host(w_hh)?,
            b_ih: host(b_ih)?,
            b_hh: host(b_hh)?,
        })
    }

    /// The hidden size.
    pub(super) fn hidden(&self) -> i64 {
        self.hidden
    }
}

impl LstmNet {
    pub(crate) fn new(vs: &nn::Path, dims: NetDims, cfg: &LstmConfig) -> Self {
        let fast = Recurrent::new(vs, "fast", dims.fast_dim as i64, cfg.fast_hidden);
        let slow = Recurrent::new(vs, "slow", dims.slow_dim as i64, cfg.slow_hidden);
        let mut ctx = Vec::new();
        let mut d = dims.context_dim as i64;
        for (i, &h) in cfg.context_hidden.iter().enumerate() {
            ctx.push(nn::linear(vs / "ctx" / format!("l{i}"), d, h, Default::default()));
            d = h;
        }
        let mut head = Vec::new();
        let mut hd = cfg.fast_hidden + cfg.slow_hidden + d;
        for (i, &h) in cfg.head_hidden.iter().chain(std::iter::once(&3)).enumerate() {
            head.push(nn::linear(vs / "head" / format!("l{i}"), hd, h, Default::default()));
            hd = h;
        }
        LstmNet { fast, slow, ctx, head, activation: cfg.activation, dims }
    }

    fn act(&self, x: Tensor) -> Tensor {
        match self.activation {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.relu(),
        }
    }

    /// Logits `[B, 3]` from `fast` `[B, F, nf]`, `slow` `[B, S, ns]`, `context` `[B, nc]`.
    pub(crate) fn forward(&self, fast: &Tensor, slow: &Tensor, context: &Tensor) -> Tensor {
        self.head_forward(self.fast.last_hidden(fast), self.slow.last_hidden(slow), context)
    }

    /// The two LSTM layers, fast and slow.
    pub(super) fn recurrent(&self) -> [&Recurrent; 2] {
        [&self.fast, &self.slow]
    }

    /// Logits `[B, 3]` from the LSTM layers' last hidden states `hf` `[B, fast_hidden]` and `hs`
    /// `[B, slow_hidden]` and `context` `[B, nc]`: the network past its LSTM layers.
    pub(super) fn head_forward(&self, hf: Tensor, hs: Tensor, context: &Tensor) -> Tensor {
        let mut c = context.shallow_clone();
        for l in &self.ctx {
            c = self.act(l.forward(&c));
        }
        let kind = hf.kind();
        let mut z = Tensor::cat(&[hf, hs, c.to_kind(kind)], 1);
        let last = self.head.len() - 1;
        for (i, l) in self.head.iter().enumerate() {
            z = l.forward(&z);
            if i < last {
                z = self.act(z);
            }
        }
        z
    }

    /// Another handle on the same weights (the same autograd leaves), for a training thread: what it
    /// computes, and the gradients it takes, are those of this network.
    pub(super) fn replica(&self) -> LstmNet {
        let linears = |ls: &[nn::Linear]| -> Vec<nn::Linear> {
            ls.iter()
                .map(|l| nn::Linear { ws: l.ws.shallow_clone(), bs: l.bs.as_ref().map(Tensor::shallow_clone) })
                .collect()
        };
        LstmNet {
            fast: self.fast.replica(),
            slow: self.slow.replica(),
            ctx: linears(&self.ctx),
            head: linears(&self.head),
            activation: self.activation,
            dims: self.dims,
        }
    }

    /// Class probabilities `[B, 3]`.
    pub(crate) fn probs(&self, fast: &Tensor, slow: &Tensor, context: &Tensor) -> Tensor {
        self.forward(fast, slow, context).to_kind(Kind::Float).softmax(-1, Kind::Float)
    }

    /// The weights as plain arrays for the ONNX writer (PyTorch layout and gate order).
    pub(crate) fn export(&self, vs: &nn::VarStore) -> Result<LstmClassifier, tch::TchError> {
        let vars = vs.variables();
        let get = |name: &str| -> Result<Vec<f32>, tch::TchError> {
            let t = vars.get(name).ok_or_else(|| tch::TchError::FileFormat(format!("no variable {name}")))?;
            Vec::<f32>::try_from(t.to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous().reshape([-1]))
        };
        let layer = |p: &str, input: usize, hidden: i64| -> Result<LstmLayer, tch::TchError> {
            Ok(LstmLayer {
                input_size: input,
                hidden: hidden as usize,
                w_ih: get(&format!("{p}.weight_ih_l0"))?,
                w_hh: get(&format!("{p}.weight_hh_l0"))?,
                b_ih: get(&format!("{p}.bias_ih_l0"))?,
                b_hh: get(&format!("{p}.bias_hh_l0"))?,
            })
        };
        let dense = |l: &nn::Linear, name: &str| -> Result<Dense, tch::TchError> {
            let size = l.ws.size();
            Ok(Dense {
                in_dim: size[1] as usize,
                out_dim: size[0] as usize,
                weight: get(&format!("{name}.weight"))?,
                bias: get(&format!("{name}.bias"))?,
            })
        };
        let fast_hidden = vars.get("fast.weight_hh_l0").map(|t| t.size()[1]).unwrap_or(0);
        let slow_hidden = vars.get("slow.weight_hh_l0").map(|t| t.size()[1]).unwrap_or(0);
        Ok(LstmClassifier {
            fast: layer("fast", self.dims.fast_dim, fast_hidden)?,
            fast_len: self.dims.fast_len,
            slow: layer("slow", self.dims.slow_dim, slow_hidden)?,
            slow_len: self.dims.slow_len,
            context: self
                .ctx
                .iter()
                .enumerate()
                .map(|(i, l)| dense(l, &format!("ctx.l{i}")))
                .collect::<Result<_, _>>()?,
            context_dim: self.dims.context_dim,
            head: self
                .head
                .iter()
                .enumerate()
                .map(|(i, l)| dense(l, &format!("head.l{i}")))
                .collect::<Result<_, _>>()?,
            activation: self.activation,
        })
    }
}
