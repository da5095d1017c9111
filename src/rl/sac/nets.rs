//! SAC's networks, each over one flat parameter vector (a `VarStore` variable) whose layers are views:
//! the squashed-Gaussian actor (`pi/flat`) and the twin Q critics (`q/flat`, both critics' layers batched
//! into one `baddbmm` each; their Polyak-averaged copy is `q_target/flat`). One tensor per network keeps
//! Adam's and the Polyak update's work to a few operations per step, whatever the depth: on the CPU,
//! libtorch's per-operation dispatch, not the arithmetic, is what small networks cost.

use crate::onnx::{Activation, Dense};
use tch::{Device, Kind, Tensor, nn};

/// `log(2)`, for the tanh correction of the log-probability.
const LN2: f64 = std::f64::consts::LN_2;

/// One dense layer's place in a flat vector: `copies` weights `[in, out]` (batched, the critics') or one
/// `[out, in]` (the actor's, torch's `Linear` layout), then the biases.
#[derive(Debug, Clone, Copy)]
struct Layer {
    input: i64,
    out: i64,
    w: i64,
    b: i64,
}

/// The layers of `copies` towers of sizes `dims` (`[in, hidden..., out]`) and the vector's length.
fn layout(dims: &[i64], copies: i64) -> (Vec<Layer>, i64) {
    let mut len = 0;
    let layers = dims
        .windows(2)
        .map(|d| {
            let l = Layer { input: d[0], out: d[1], w: len, b: len + copies * d[0] * d[1] };
            len = l.b + copies * d[1];
            l
        })
        .collect();
    (layers, len)
}

/// torch's `Linear` initialisation, `U(-1/sqrt(in), 1/sqrt(in))` for weights and biases, as one vector.
fn init(layers: &[Layer], len: i64, device: Device) -> Tensor {
    let flat = Tensor::zeros([len], (Kind::Float, device));
    for l in layers {
        let bound = 1.0 / (l.input as f64).sqrt();
        let _ = flat.narrow(0, l.w, l.b - l.w).uniform_(-bound, bound);
        let next = layers.iter().find(|n| n.w > l.w).map_or(len, |n| n.w);
        let _ = flat.narrow(0, l.b, next - l.b).uniform_(-bound, bound);
    }
    flat
}

fn activate(x: Tensor, a: Activation) -> Tensor {
    match a {
        Activation::Tanh => x.tanh(),
        Activation::Relu => x.relu(),
    }
}

/// The action `tanh(u)`, `u = mean + exp(log_std) eps`, and its log-probability `[N]` under the
/// squashed Gaussian: the Gaussian's density of `u` less `log(1 - tanh(u)²)`, computed as `2 (ln 2 - u -
/// softplus(-2u))`, which stays finite where `tanh(u)` rounds to ±1.
pub(super) fn squashed(mean: &Tensor, log_std: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
    let u = mean + log_std.exp() * eps;
    let gauss = eps.square() * -0.5 - log_std - 0.5 * (2.0 * std::f64::consts::PI).ln();
    let squash = ((-&u * 2.0).softplus() + &u - LN2) * 2.0;
    let log_prob = (gauss + squash).sum_dim_intlist(-1, false, mean.kind());
    (u.tanh(), log_prob)
}

/// The actor: a tower whose last layer gives the mean and the log standard deviation of a Gaussian over
/// the pre-squash action `u` (`2A` outputs: means first); the action is `tanh(u)`, in (-1, 1).
pub(super) struct Actor {
    pub flat: Tensor,
    layers: Vec<Layer>,
    act_dim: i64,
    pub activation: Activation,
    log_std_bounds: (f64, f64),
}

impl Actor {
    pub(super) fn new(
        p: &nn::Path,
        dims: (usize, usize),
        hidden: &[i64],
        activation: Activation,
        bounds: (f64, f64),
    ) -> Self {
        let (obs_dim, act_dim) = (dims.0 as i64, dims.1 as i64);
        let sizes: Vec<i64> = [obs_dim].into_iter().chain(hidden.iter().copied()).chain([2 * act_dim]).collect();
        let (layers, len) = layout(&sizes, 1);
        let flat = p.var_copy("flat", &init(&layers, len, p.device()));
        Actor { flat, layers, act_dim, activation, log_std_bounds: bounds }
    }

    /// The Gaussian's mean and log standard deviation `[N, A]` (the latter squashed into its bounds).
    fn gaussian(&self, obs: &Tensor) -> (Tensor, Tensor) {
        let mut x = obs.shallow_clone();
        for (i, l) in self.layers.iter().enumerate() {
            let w = self.flat.narrow(0, l.w, l.out * l.input).view([l.out, l.input]);
            let y = x.linear(&w, Some(self.flat.narrow(0, l.b, l.out)));
            x = if i + 1 < self.layers.len() { activate(y, self.activation) } else { y };
        }
        let (lo, hi) = self.log_std_bounds;
        let log_std = (x.narrow(1, self.act_dim, self.act_dim).tanh() + 1.0) * (0.5 * (hi - lo)) + lo;
        (x.narrow(1, 0, self.act_dim), log_std)
    }

    /// A sampled action `tanh(u)` `[N, A]` for standard normal draws `eps` `[N, A]` (reparameterised:
    /// gradients flow through it) and its log-probability `[N]`.
    pub(super) fn sample(&self, obs: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
        let (mean, log_std) = self.gaussian(obs);
        squashed(&mean, &log_std, eps)
    }

    /// The deterministic action `tanh(mean)` `[N, A]`: what is exported and served.
    pub(super) fn deterministic(&self, obs: &Tensor) -> Tensor {
        self.gaussian(obs).0.tanh()
    }

    /// The deterministic policy's layers (the tower, and the mean's rows of the last layer), for the ONNX
    /// writer.
    pub(super) fn policy_layers(&self) -> Result<(Vec<Dense>, Dense), tch::TchError> {
        let host = Vec::<f32>::try_from(self.flat.to_device(Device::Cpu).to_kind(Kind::Float))?;
        let dense = |l: &Layer, rows: i64| {
            let (w, b) = (l.w as usize, l.b as usize);
            let (i, r) = (l.input as usize, rows as usize);
            Dense { in_dim: i, out_dim: r, weight: host[w..w + r * i].to_vec(), bias: host[b..b + r].to_vec() }
        };
        let (last, tower) = self.layers.split_last().ok_or(tch::TchError::Shape("the actor has no layer".into()))?;
        Ok((tower.iter().map(|l| dense(l, l.out)).collect(), dense(last, self.act_dim)))
    }
}

/// Two Q networks on `[obs, action]`, layer by layer in one batched matrix product.
pub(super) struct TwinQ {
    pub flat: Tensor,
    layers: Vec<Layer>,
    activation: Activation,
}

impl TwinQ {
    pub(super) fn new(p: &nn::Path, dims: (usize, usize), hidden: &[i64], activation: Activation) -> Self {
        let input = (dims.0 + dims.1) as i64;
        let sizes: Vec<i64> = [input].into_iter().chain(hidden.iter().copied()).chain([1]).collect();
        let (layers, len) = layout(&sizes, 2);
        let flat = p.var_copy("flat", &init(&layers, len, p.device()));
        TwinQ { flat, layers, activation }
    }

    /// Both critics' values `[2, N]` of `obs` `[N, D]` and `act` `[N, A]`.
    pub(super) fn forward(&self, obs: &Tensor, act: &Tensor) -> Tensor {
        let x = Tensor::cat(&[obs, act], 1);
        let n = x.size()[0];
        let mut x = x.unsqueeze(0).expand([2, n, -1], false);
        for (i, l) in self.layers.iter().enumerate() {
            let w = self.flat.narrow(0, l.w, 2 * l.input * l.out).view([2, l.input, l.out]);
            let b = self.flat.narrow(0, l.b, 2 * l.out).view([2, 1, l.out]);
            let y = b.baddbmm(&x, &w, 1.0, 1.0);
            x = if i + 1 < self.layers.len() { activate(y, self.activation) } else { y };
        }
        x.squeeze_dim(-1)
    }
}

/// `target = tau * source + (1 - tau) * target`.
pub(super) fn polyak(target: &Tensor, source: &Tensor, tau: f64) {
    tch::no_grad(|| {
        let _ = target.shallow_clone().lerp_(source, tau);
    })
}
