//! Running mean and variance of observations (parallel Welford/Chan update), kept on the training device
//! and frozen into the exported ONNX graph.

use tch::{Device, Kind, Tensor, nn};

pub struct RunningNorm {
    pub mean: Tensor,
    pub var: Tensor,
    pub count: Tensor,
    pub eps: f64,
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
}
