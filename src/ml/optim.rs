//! Adam and AdamW with libtorch's formulas, their state kept in the `VarStore` so that a checkpoint carries
//! it: `adam.m` and `adam.v` (the moments of every parameter, flat, in the order given) and `adam.step`.
//! tch's `nn::Optimizer` keeps its state inside libtorch, out of reach of `VarStore::save`, so a resumed
//! run used to restart the moments from zero.

//!
//! The one Adam of the trainers: its constants and its moment update are here, and every Adam uses them
//! (`Adam` below, the population's batched step, `rl::ppo::population`, and the native CPU trainer's loop
//! in f32, `rl::ppo::native`, which cannot share tensor code but shares the constants).

use tch::{Tensor, nn};

/// Adam's decay of the first moment (libtorch's default).
pub(crate) const BETA1: f64 = 0.9;
/// Adam's decay of the second moment (libtorch's default).
pub(crate) const BETA2: f64 = 0.999;
/// libtorch's default `eps` (SAC's, and AdamW's for the LSTM).
pub(crate) const TORCH_EPS: f64 = 1e-8;
/// PPO's Adam `eps` (SB3's and CleanRL's 1e-5, not libtorch's 1e-8), for every PPO trainer.
pub(crate) const PPO_EPS: f64 = 1e-5;

/// Adam's moment update, in place: `m = β1 m + (1 - β1) g`, `v = β2 v + (1 - β2) g²` (libtorch's order of
/// operations, so that every tch trainer gives the same bits).
pub(crate) fn update_moments(m: &mut Tensor, v: &mut Tensor, g: &Tensor) {
    let _ = m.g_mul_scalar_(BETA1);
    let _ = m.g_add_(&(g * (1.0 - BETA1)));
    let _ = v.g_mul_scalar_(BETA2);
    let _ = v.g_add_(&(g.square() * (1.0 - BETA2)));
}

pub(crate) struct Adam {
    params: Vec<Tensor>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    pub flat_m: Tensor,
    pub flat_v: Tensor,
    step_var: Tensor,
    /// Steps taken (the bias correction's exponent).
    pub steps: u64,
    eps: f64,
    /// Decoupled weight decay (AdamW); 0 for Adam.
    weight_decay: f64,
}

impl Adam {
    /// Registers `adam.m`, `adam.v` and `adam.step` under `root` for `params` (each parameter's moments are
    /// views into the flat variables, so loading a checkpoint restores them in place).
    pub(crate) fn new(root: &nn::Path, params: Vec<Tensor>, eps: f64, weight_decay: f64) -> Adam {
        let len: i64 = params.iter().map(|p| p.numel() as i64).sum();
        let path = root / "adam";
        let (flat_m, flat_v) = (path.zeros_no_train("m", &[len]), path.zeros_no_train("v", &[len]));
        let step_var = path.zeros_no_train("step", &[1]);
        let (mut m, mut v, mut off) = (Vec::new(), Vec::new(), 0i64);
        for p in &params {
            let n = p.numel() as i64;
            m.push(flat_m.narrow(0, off, n).view(p.size().as_slice()));
            v.push(flat_v.narrow(0, off, n).view(p.size().as_slice()));
            off += n;
        }
        Adam { params, m, v, flat_m, flat_v, step_var, steps: 0, eps, weight_decay }
    }

    /// Whether a `VarStore` variable name is this optimizer's state.
    pub(crate) fn is_state(name: &str) -> bool {
        name.starts_with("adam.")
    }

    /// Reads the step count from `adam.step` (after a `VarStore` load); a read-back, so a device fault
    /// comes back as libtorch's error.
    pub(crate) fn load_steps(&mut self) -> Result<(), tch::TchError> {
        self.steps = self.step_var.f_double_value(&[0])?.max(0.0) as u64;
        Ok(())
    }

    /// Writes the step count into `adam.step` (before a `VarStore` save).
    pub(crate) fn store_steps(&self) {
        tch::no_grad(|| {
            let _ = self.step_var.shallow_clone().fill_(self.steps as f64);
        });
    }

    /// Forgets the moments and the step count (a checkpoint from before they were saved).
    pub(crate) fn reset(&mut self) {
        tch::no_grad(|| {
            let _ = self.flat_m.zero_();
            let _ = self.flat_v.zero_();
            let _ = self.step_var.zero_();
        });
        self.steps = 0;
    }

    /// The parameters, in the order `step_grads` takes their gradients.
    pub(crate) fn params(&self) -> &[Tensor] {
        &self.params
    }

    pub(crate) fn zero_grad(&mut self) {
        self.params.iter_mut().for_each(Tensor::zero_grad);
    }

    /// One step at learning rate `lr` over the parameters that have a gradient.
    pub(crate) fn step(&mut self, lr: f64) {
        let grads: Vec<Tensor> = self.params.iter().map(Tensor::grad).collect();
        self.step_grads(lr, &grads);
    }

    /// One step at learning rate `lr` with `grads`, one per parameter in the order given to `new` (an
    /// undefined tensor: that parameter has no gradient and is left alone), in place of their `.grad`.
    pub(crate) fn step_grads(&mut self, lr: f64, grads: &[Tensor]) {
        self.steps += 1;
        let t = self.steps.min(i32::MAX as u64) as i32;
        let (bc1, bc2) = (1.0 - BETA1.powi(t), 1.0 - BETA2.powi(t));
        tch::no_grad(|| {
            for (((p, m), v), g) in self.params.iter_mut().zip(&mut self.m).zip(&mut self.v).zip(grads) {
                if !g.defined() {
                    continue;
                }
                if self.weight_decay != 0.0 {
                    let _ = p.g_mul_scalar_(1.0 - lr * self.weight_decay);
                }
                update_moments(m, v, g);
                let denom = v.sqrt() / bc2.sqrt() + self.eps;
                let _ = p.g_add_(&(&*m / denom * (-lr / bc1)));
            }
        });
        self.store_steps();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// Against libtorch's own AdamW (tch's `nn::AdamW`) on the same problem, step by step.
    #[test]
    fn matches_libtorchs_adamw_and_its_state_round_trips_through_a_checkpoint() {
        let make = || {
            let vs = nn::VarStore::new(Device::Cpu);
            let w = vs.root().var_copy("w", &Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.1]).view([2, 2]));
            (vs, w)
        };
        let (vs_a, w_a) = make();
        let (vs_b, w_b) = make();
        let mut ours = Adam::new(&vs_a.root(), vec![w_a.shallow_clone()], 1e-8, 0.01);
        let mut theirs = nn::OptimizerConfig::build(nn::AdamW { wd: 0.01, ..Default::default() }, &vs_b, 0.05).unwrap();
        let x = Tensor::from_slice(&[1.0f32, 2.0, -0.5, 0.3]).view([2, 2]);
        for _ in 0..20 {
            ours.zero_grad();
            (w_a.matmul(&x).tanh().sum(Kind::Float) + w_a.square().sum(Kind::Float)).backward();
            ours.step(0.05);
            theirs.zero_grad();
            (w_b.matmul(&x).tanh().sum(Kind::Float) + w_b.square().sum(Kind::Float)).backward();
            theirs.step();
        }
        let diff = (&w_a - &w_b).abs().max().double_value(&[]);
        assert!(diff < 1e-6, "ours and libtorch's AdamW differ by {diff}");
        assert!(
            (&w_a - Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.1]).view([2, 2])).abs().max().double_value(&[]) > 0.1
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.safetensors");
        vs_a.save(&path).unwrap();
        let (mut vs_c, w_c) = make();
        let mut resumed = Adam::new(&vs_c.root(), vec![w_c], 1e-8, 0.01);
        vs_c.load(&path).unwrap();
        resumed.load_steps().unwrap();
        assert_eq!(resumed.steps, 20);
        assert_eq!(
            Vec::<f32>::try_from(&resumed.m[0].reshape([-1])).unwrap(),
            Vec::<f32>::try_from(&ours.m[0].reshape([-1])).unwrap()
        );
        assert_eq!(Vec::<f32>::try_from(&resumed.flat_v).unwrap(), Vec::<f32>::try_from(&ours.flat_v).unwrap());
    }
}
