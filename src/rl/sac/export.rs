//! SAC's deterministic policy as ONNX: `obs -> clip((obs - mean) / sqrt(var + eps), -c, c) -> [Gemm ->
//! act]* -> Gemm -> Tanh`, with the PPO policy's contract (input `obs [-1, D]`, output `action [-1, A]`,
//! each in [-1, 1]), so that the engine serves it through the same path.

use crate::onnx::mlp::ObsNorm;
use crate::onnx::{Activation, Dense, Dim, GraphBuilder, OnnxError, encode};

#[derive(Debug, Clone, PartialEq)]
pub struct SacPolicy {
    pub norm: Option<ObsNorm>,
    pub hidden: Vec<Dense>,
    pub activation: Activation,
    /// The Gaussian's mean; the action is its tanh.
    pub head: Dense,
}

impl SacPolicy {
    pub fn obs_dim(&self) -> usize {
        self.hidden.first().unwrap_or(&self.head).in_dim
    }

    pub fn act_dim(&self) -> usize {
        self.head.out_dim
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
        self.head.forward(&x).into_iter().map(f32::tanh).collect()
    }

    fn validate(&self) -> Result<(), OnnxError> {
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

    /// The ONNX file's bytes: input `input` `[batch, obs_dim]`, output `output` `[batch, act_dim]`.
    pub fn to_onnx(&self, input: &str, output: &str, metadata: &[(&str, &str)]) -> Result<Vec<u8>, OnnxError> {
        self.validate()?;
        let mut g = GraphBuilder::new("tradebot_sac_policy");
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
        g.node("Tanh", &[&y], &[output], &[]);
        g.output(output, &[Dim::batch(), Dim::Fixed(self.act_dim() as i64)]);
        Ok(encode(&g.finish(metadata)))
    }
}
