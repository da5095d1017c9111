//! An MLP policy as ONNX: `obs -> clip((obs - mean) / sqrt(var + eps), -c, c) -> [Gemm -> act]* -> Gemm
//! -> squash`, where the squash is PPO's `clip(-1, 1)` or SAC's `tanh`. The observation normalisation lives
//! inside the graph, so the live path cannot apply statistics other than the ones the policy was trained
//! with.

use super::{Activation, Dense, Dim, GraphBuilder, OnnxError, encode};

/// Running observation statistics frozen at export.
#[derive(Debug, Clone, PartialEq)]
pub struct ObsNorm {
    pub mean: Vec<f32>,
    pub var: Vec<f32>,
    pub eps: f32,
    pub clip: f32,
}

impl ObsNorm {
    /// `sqrt(var + eps)` in f32, computed exactly as the training side does.
    pub fn std(&self) -> Vec<f32> {
        self.var.iter().map(|v| (v + self.eps).sqrt()).collect()
    }

    pub fn apply(&self, x: &[f32]) -> Vec<f32> {
        x.iter().zip(&self.mean).zip(self.std()).map(|((x, m), s)| ((x - m) / s).clamp(-self.clip, self.clip)).collect()
    }
}

/// What turns the head's output into the action.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Squash {
    /// The head's output as it is.
    Identity,
    /// Clipped to [-c, c] (PPO: 1.0).
    Clip(f32),
    /// `tanh`, the deterministic action of SAC's squashed Gaussian.
    Tanh,
}

impl Squash {
    fn apply(self, y: Vec<f32>) -> Vec<f32> {
        match self {
            Squash::Identity => y,
            Squash::Clip(c) => y.into_iter().map(|v| v.clamp(-c, c)).collect(),
            Squash::Tanh => y.into_iter().map(f32::tanh).collect(),
        }
    }

    /// The graph's name, as each trainer's exporter has always written it.
    fn graph_name(self) -> &'static str {
        match self {
            Squash::Tanh => "tradebot_sac_policy",
            Squash::Identity | Squash::Clip(_) => "tradebot_ppo_policy",
        }
    }
}

/// An MLP policy as the ONNX writer exports it: the observation normalisation (optional), the hidden
/// layers with their activation, the output layer and its squash.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpPolicy {
    /// Frozen observation normalisation (mean, variance, clip), inside the graph.
    pub norm: Option<ObsNorm>,
    /// The hidden layers, each followed by `activation`.
    pub hidden: Vec<Dense>,
    /// The activation between layers.
    pub activation: Activation,
    /// The output layer.
    pub head: Dense,
    /// What bounds the output (`Identity`, `Clip` to [-1, 1], or `Tanh`).
    pub squash: Squash,
}

impl MlpPolicy {
    /// The input width (the first layer's).
    pub fn obs_dim(&self) -> usize {
        self.hidden.first().unwrap_or(&self.head).in_dim
    }

    /// The output width (one action per asset).
    pub fn act_dim(&self) -> usize {
        self.head.out_dim
    }

    /// Checks that every layer's shape matches its weights and the next layer's input.
    pub fn validate(&self) -> Result<(), OnnxError> {
        let mut dim = self.obs_dim();
        if let Some(n) = &self.norm
            && (n.mean.len() != dim || n.var.len() != dim)
        {
            return Err(OnnxError::Shape(format!(
                "obs norm has {}/{} values for {dim} inputs",
                n.mean.len(),
                n.var.len()
            )));
        }
        for (i, l) in self.hidden.iter().chain(std::iter::once(&self.head)).enumerate() {
            l.check(&format!("layer {i}"))?;
            if l.in_dim != dim {
                return Err(OnnxError::Shape(format!("layer {i} takes {} inputs but gets {dim}", l.in_dim)));
            }
            dim = l.out_dim;
        }
        Ok(())
    }

    /// The reference forward pass for one observation.
    pub fn forward(&self, obs: &[f32]) -> Vec<f32> {
        let mut x = match &self.norm {
            Some(n) => n.apply(obs),
            None => obs.to_vec(),
        };
        for l in &self.hidden {
            x = l.forward(&x).into_iter().map(|v| self.activation.apply(v)).collect();
        }
        self.squash.apply(self.head.forward(&x))
    }

    /// The ONNX file's bytes: input `input` `[batch, obs_dim]`, output `output` `[batch, act_dim]`.
    pub fn to_onnx(&self, input: &str, output: &str, metadata: &[(&str, &str)]) -> Result<Vec<u8>, OnnxError> {
        self.validate()?;
        let mut g = GraphBuilder::new(self.squash.graph_name());
        g.input(input, &[Dim::batch(), Dim::Fixed(self.obs_dim() as i64)]);
        let mut x = input.to_string();
        if let Some(n) = &self.norm {
            let d = [1, self.obs_dim() as i64];
            let mean = g.constant_f32("obs_mean", &d, &n.mean)?;
            let std = g.constant_f32("obs_std", &d, &n.std())?;
            let centred = g.op("Sub", &[&x, &mean], &[]);
            let scaled = g.op("Div", &[&centred, &std], &[]);
            let lo = g.constant_f32("obs_clip_lo", &[], &[-n.clip])?;
            let hi = g.constant_f32("obs_clip_hi", &[], &[n.clip])?;
            x = g.op("Clip", &[&scaled, &lo, &hi], &[]);
        }
        for (i, l) in self.hidden.iter().enumerate() {
            let z = l.add_to_graph(&mut g, &x, &format!("pi{i}"))?;
            x = g.op(self.activation.op(), &[&z], &[]);
        }
        let y = self.head.add_to_graph(&mut g, &x, "pi_mean")?;
        match self.squash {
            Squash::Clip(c) => {
                let lo = g.constant_f32("act_lo", &[], &[-c])?;
                let hi = g.constant_f32("act_hi", &[], &[c])?;
                g.node("Clip", &[&y, &lo, &hi], &[output], &[]);
            }
            Squash::Tanh => g.node("Tanh", &[&y], &[output], &[]),
            Squash::Identity => g.node("Identity", &[&y], &[output], &[]),
        }
        g.output(output, &[Dim::batch(), Dim::Fixed(self.act_dim() as i64)]);
        Ok(encode(&g.finish(metadata)))
    }
}
