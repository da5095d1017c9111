//! Running mean and variance of observations (parallel Welford/Chan update), kept on the training device
//! and frozen into the exported ONNX graph.

use crate::onnx::mlp::ObsNorm;
use tch::{Device, Kind, Tensor, nn};

/// The running mean and variance of the observations, as variables of the trainer's `VarStore`.
pub struct RunningNorm {
    /// `[dim]`: the mean of each observation value.
    pub mean: Tensor,
    /// `[dim]`: the variance of each observation value.
    pub var: Tensor,
    /// `[1]`: the observations counted so far (starts at 1e-4).
    pub count: Tensor,
    /// Added to the variance before its square root (1e-8).
    pub eps: f64,
    /// Normalised values are clipped to ± this (`ppo.obs_clip`).
    pub clip: f64,
}

impl RunningNorm {
    /// Statistics as variables of `vs` (so they are checkpointed with the model) but never trained.
    pub fn new(vs: &nn::Path, dim: usize, clip: f64) -> Self {
        let no_grad = |t: Tensor| t.set_requires_grad(false);
        RunningNorm {
            mean: no_grad(vs.zeros("mean", &[dim as i64])),
            var: no_grad(vs.ones("var", &[dim as i64])),
            count: no_grad(vs.var("count", &[1], nn::Init::Const(1e-4))),
            eps: 1e-8,
            clip,
        }
    }

    /// Folds a batch `[N, dim]` into the statistics.
    pub fn update(&mut self, x: &Tensor) {
        tch::no_grad(|| {
            let x = x.to_kind(Kind::Float);
            let n = x.size()[0] as f64;
            let batch_mean = x.mean_dim(0, false, Kind::Float);
            let batch_var = x.var_dim(0, false, false);
            let delta = &batch_mean - &self.mean;
            let total = &self.count + n;
            let new_mean = &self.mean + &delta * n / &total;
            let m2 = &self.var * &self.count + batch_var * n + delta.square() * &self.count * n / &total;
            let new_var = m2 / &total;
            self.mean.copy_(&new_mean);
            self.var.copy_(&new_var);
            self.count.copy_(&total);
        });
    }

    /// `clip((x - mean) / sqrt(var + eps), -clip, clip)`: the same arithmetic as the ONNX graph.
    pub fn normalize(&self, x: &Tensor) -> Tensor {
        let std = (&self.var + self.eps).sqrt();
        ((x - &self.mean) / std).clamp(-self.clip, self.clip)
    }

    /// The statistics as they are now, in host memory, for the ONNX writer.
    pub fn frozen(&self) -> Result<ObsNorm, tch::TchError> {
        let to_vec = |t: &Tensor| Vec::<f32>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Float).contiguous());
        Ok(ObsNorm { mean: to_vec(&self.mean)?, var: to_vec(&self.var)?, eps: self.eps as f32, clip: self.clip as f32 })
    }

    /// The device the statistics live on.
    pub fn device(&self) -> Device {
        self.mean.device()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_batch_statistics() {
        let vs = nn::VarStore::new(Device::Cpu);
        let mut n = RunningNorm::new(&vs.root(), 3, 10.0);
        let data = Tensor::randn([1000, 3], (Kind::Float, Device::Cpu)) * 3.0 + 5.0;
        for chunk in data.split(100, 0) {
            n.update(&chunk);
        }
        let want_mean = data.mean_dim(0, false, Kind::Float);
        let want_var = data.var_dim(0, false, false);
        assert!((&n.mean - want_mean).abs().max().double_value(&[]) < 1e-3);
        assert!((&n.var - want_var).abs().max().double_value(&[]) < 1e-2);
        let z = n.normalize(&data);
        assert!(z.mean(Kind::Float).abs().double_value(&[]) < 1e-2);
    }

    #[test]
    fn the_frozen_statistics_normalise_as_the_tensors_do() {
        let vs = nn::VarStore::new(Device::Cpu);
        let mut n = RunningNorm::new(&vs.root(), 4, 2.0);
        let data = Tensor::randn([500, 4], (Kind::Float, Device::Cpu)) * 4.0 - 3.0;
        n.update(&data);
        let f = n.frozen().unwrap();
        assert_eq!(f.mean, Vec::<f32>::try_from(&n.mean).unwrap());
        assert_eq!(f.var, Vec::<f32>::try_from(&n.var).unwrap());
        assert_eq!((f.eps, f.clip), (1e-8, 2.0));
        let want = Vec::<f32>::try_from(n.normalize(&data).reshape([-1])).unwrap();
        let rows = Vec::<f32>::try_from(data.reshape([-1])).unwrap();
        let got: Vec<f32> = rows.chunks(4).flat_map(|r| f.apply(r)).collect();
        let clipped = want.iter().filter(|v| v.abs() == 2.0).count();
        assert!(clipped > 0 && clipped < want.len(), "the sample must reach the clip and stay inside it too");
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6, "host {g} vs tensor {w}");
        }
    }
}
