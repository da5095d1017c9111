//! Our own ONNX writer. libtorch cannot write ONNX, so trained weights are turned into ONNX graphs here:
//! `proto` (the onnx.proto messages, prost), `builder` (graph assembly), and the two model families,
//! `mlp` (the PPO and SAC policies: observation normalisation, Gemm + activation layers, the mean action
//! clipped to [-1, 1] or squashed by tanh) and `lstm` (the direction classifier: two LSTM branches and a
//! dense branch into softmax probabilities). Each family also has a plain-Rust forward pass, the reference the exported graph is
//! checked against.

pub(crate) mod builder;
#[cfg(feature = "train")]
pub(crate) mod lstm;
pub(crate) mod mlp;
pub(crate) mod proto;

pub(crate) use builder::{Attr, Dim, GraphBuilder, encode};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OnnxError {
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error("a weight is not finite: {0}; the model diverged and cannot be exported")]
    NotFinite(String),
}

/// The activation between layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// `tanh(x)`.
    Tanh,
    /// `max(x, 0)`.
    Relu,
}

impl Activation {
    /// The activation of one value (the reference forward's).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.max(0.0),
        }
    }

    /// The ONNX operator's name.
    pub fn op(self) -> &'static str {
        match self {
            Activation::Tanh => "Tanh",
            Activation::Relu => "Relu",
        }
    }
}

/// A fully connected layer, weights laid out as PyTorch's `Linear.weight`: `[out_dim][in_dim]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    /// Input width.
    pub in_dim: usize,
    /// Output width.
    pub out_dim: usize,
    /// `out_dim × in_dim` weights, row-major.
    pub weight: Vec<f32>,
    /// `out_dim` biases.
    pub bias: Vec<f32>,
}

impl Dense {
    /// Checks that the weights and biases have the lengths the dimensions say; `what` names the layer
    /// in the error.
    pub fn check(&self, what: &str) -> Result<(), OnnxError> {
        if self.weight.len() != self.in_dim * self.out_dim || self.bias.len() != self.out_dim {
            return Err(OnnxError::Shape(format!(
                "{what}: weight has {} values and bias {} for {}x{}",
                self.weight.len(),
                self.bias.len(),
                self.out_dim,
                self.in_dim
            )));
        }
        Ok(())
    }

    /// `y = W x + b` for one row.
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        (0..self.out_dim)
            .map(|o| {
                let row = &self.weight[o * self.in_dim..(o + 1) * self.in_dim];
                row.iter().zip(x).map(|(w, v)| w * v).sum::<f32>() + self.bias[o]
            })
            .collect()
    }

    /// Adds `Gemm(x, W, b, transB=1)` and returns its output.
    pub fn add_to_graph(&self, g: &mut GraphBuilder, x: &str, what: &str) -> Result<String, OnnxError> {
        self.check(what)?;
        let w = g.constant_f32(&format!("{what}_w"), &[self.out_dim as i64, self.in_dim as i64], &self.weight)?;
        let b = g.constant_f32(&format!("{what}_b"), &[self.out_dim as i64], &self.bias)?;
        Ok(g.op("Gemm", &[x, &w, &b], &[("transB", Attr::Int(1))]))
    }
}

#[cfg(test)]
mod tests;
