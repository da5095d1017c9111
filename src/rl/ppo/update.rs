//! PPO's rollout and update on libtorch (the CUDA path, and the CPU with `ppo.cpu_backend = "torch"`):
//! `n_steps` transitions under `no_grad`, GAE(λ) on the device, then the epochs of clipped-surrogate
//! minibatch steps with their statistics summed on the device and read back once.

use super::stats::update_stats;
use super::{Ppo, PpoError, UpdateStats, gae};
use crate::ml::readback::scalar;
use crate::rl::BatchEnv;
use tch::{Kind, Tensor};

/// The rollout of one update, `[T, E, ...]` (a population's `[T, P, E, ...]`), on the training device.
pub(super) struct Rollout {
    pub(super) obs: Tensor,
    pub(super) actions: Tensor,
    pub(super) log_probs: Tensor,
    pub(super) values: Tensor,
    pub(super) rewards: Tensor,
    pub(super) dones: Tensor,
    pub(super) last_value: Tensor,
}

impl Ppo {
    /// `n_steps` steps of every env under the current policy (actions sampled on the device).
    pub(super) fn collect<E: BatchEnv + ?Sized>(
        &mut self,
        env: &mut E,
        mut obs: Tensor,
    ) -> Result<(Rollout, Tensor), PpoError> {
        let t_len = self.cfg.n_steps;
        let (mut o, mut a, mut lp, mut v, mut r, mut d) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..t_len {
            let (action, log_prob, value) = tch::no_grad(|| {
                tch::autocast(self.amp(), || {
                    let mean = self.model.mean(&obs).to_kind(Kind::Float);
                    let action = &mean + self.model.log_std().exp() * mean.randn_like();
                    let log_prob = self.model.log_prob(&mean, &action);
                    (action, log_prob, self.model.value(&obs).to_kind(Kind::Float))
                })
            });
            let step = env.step(&action.to_device(env.device()))?;
            for ret in &step.finished {
                self.recent.push_back(*ret);
                if self.recent.len() > 20 {
                    self.recent.pop_front();
                }
                self.episodes += 1;
            }
            o.push(obs);
            a.push(action);
            lp.push(log_prob);
            v.push(value);
            r.push(step.reward.to_device(self.device()).to_kind(Kind::Float));
            d.push(step.done.to_device(self.device()).to_kind(Kind::Float));
            obs = self.observe(&step.obs);
        }
        let last_value = tch::no_grad(|| self.model.value(&obs).to_kind(Kind::Float));
        let rollout = Rollout {
            obs: Tensor::stack(&o, 0),
            actions: Tensor::stack(&a, 0),
            log_probs: Tensor::stack(&lp, 0),
            values: Tensor::stack(&v, 0),
            rewards: Tensor::stack(&r, 0),
            dones: Tensor::stack(&d, 0),
            last_value,
        };
        Ok((rollout, obs))
    }

    /// GAE(λ): advantages `[T, E]`, computed backwards on the device: one kernel launch on CUDA
    /// (`gae::GaeKernel`; its failure is the update's error), the tensor ops elsewhere.
    pub(super) fn advantages(&self, ro: &Rollout) -> Result<Tensor, PpoError> {
        let (gamma, lambda) = (self.cfg.gamma, self.cfg.gae_lambda);
        if let Some(k) = &self.gae {
            return k
                .advantages(gamma, lambda, &ro.rewards, &ro.values, &ro.dones, &ro.last_value)
                .map_err(|e| PpoError::Device(format!("the GAE kernel failed: {e}")));
        }
        Ok(gae::gae_ops(gamma, lambda, &ro.rewards, &ro.values, &ro.dones, &ro.last_value))
    }

    /// The epochs of minibatch steps on one rollout. The statistics are summed on the device and read
    /// once at the end (with a target KL, each epoch's mean KL is read too): no host read per minibatch.
    pub(super) fn update(&mut self, ro: &Rollout, lr: f64) -> Result<UpdateStats, PpoError> {
        let adv = tch::no_grad(|| self.advantages(ro))?;
        let returns = &adv + &ro.values;
        let n = adv.numel() as i64;
        let flat = |t: &Tensor| t.reshape([n, -1]);
        let (obs, actions) = (flat(&ro.obs), flat(&ro.actions));
        let (old_lp, old_v, adv, returns) =
            (ro.log_probs.reshape([n]), ro.values.reshape([n]), adv.reshape([n]), returns.reshape([n]));
        let device = self.device();
        let zero = || Tensor::zeros([] as [i64; 0], (Kind::Double, device));
        // loss, policy loss, value loss, approximate KL, clip fraction: f64 sums, in minibatch order.
        let mut sums: [Tensor; 5] = std::array::from_fn(|_| zero());
        let (mut batches, mut epochs_run) = (0usize, 0);
        let bs = self.cfg.batch_size.min(n as usize) as i64;
        'epochs: for _ in 0..self.cfg.n_epochs {
            epochs_run += 1;
            let perm = Tensor::randperm(n, (Kind::Int64, self.device()));
            let (mut epoch_kl, mut epoch_batches) = (zero(), 0);
            for start in (0..n).step_by(bs as usize) {
                let idx = perm.narrow(0, start, bs.min(n - start));
                let pick = |t: &Tensor| t.index_select(0, &idx);
                let batch = [&obs, &actions, &old_lp, &old_v, &adv, &returns].map(pick);
                let s = self.tch_minibatch(&batch, lr);
                for (sum, x) in sums.iter_mut().zip(&s) {
                    *sum = &*sum + x.to_kind(Kind::Double);
                }
                epoch_kl += s[3].to_kind(Kind::Double);
                batches += 1;
                epoch_batches += 1;
            }
            if let Some(target) = self.cfg.target_kl
                && scalar(&epoch_kl)? / epoch_batches.max(1) as f64 > 1.5 * target
            {
                break 'epochs;
            }
        }
        let tail = tch::no_grad(|| {
            [returns.var(false), (&returns - &old_v).var(false), self.model.entropy()].map(|t| t.to_kind(Kind::Double))
        });
        let all: Vec<Tensor> = sums.iter().chain(&tail).map(Tensor::shallow_clone).collect();
        let v = crate::ml::readback::f64s(&Tensor::stack(&all, 0))?;
        update_stats(&v, batches, epochs_run, self.updates + 1)
    }

    /// One gradient step on a minibatch `[obs, actions, old log-prob, old value, advantage, return]`;
    /// returns the detached loss, policy loss, value loss, approximate KL and clip fraction, on the device.
    pub(super) fn tch_minibatch(&mut self, b: &[Tensor; 6], lr: f64) -> [Tensor; 5] {
        let [o, a, olp, ov, ad, ret] = b;
        let mut ad = ad.shallow_clone();
        if self.cfg.normalize_advantage && ad.numel() > 1 {
            ad = (&ad - ad.mean(Kind::Float)) / (ad.std(true) + 1e-8);
        }
        let (mean, value) = tch::autocast(self.amp(), || (self.model.mean(o), self.model.value(o)));
        let (mean, value) = (mean.to_kind(Kind::Float), value.to_kind(Kind::Float));
        let log_ratio = self.model.log_prob(&mean, a) - olp;
        let ratio = log_ratio.exp();
        let clip = self.cfg.clip_range;
        let pg = -(&ratio * &ad).min_other(&(ratio.clamp(1.0 - clip, 1.0 + clip) * &ad)).mean(Kind::Float);
        let vl = match self.cfg.clip_range_vf {
            Some(c) => {
                let clipped = ov + (&value - ov).clamp(-c, c);
                (&value - ret).square().max_other(&(clipped - ret).square()).mean(Kind::Float) * 0.5
            }
            None => (&value - ret).square().mean(Kind::Float) * 0.5,
        };
        let entropy = self.model.entropy();
        let loss = &pg + &vl * self.cfg.vf_coef - &entropy * self.cfg.ent_coef;
        self.adam.zero_grad();
        loss.backward();
        self.adam.clip_grad_norm(self.cfg.max_grad_norm);
        self.adam.step(lr);
        tch::no_grad(|| {
            let kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float);
            let cf = (&ratio - 1.0).abs().gt(clip).to_kind(Kind::Float).mean(Kind::Float);
            [loss.detach(), pg.detach(), vl.detach(), kl, cf]
        })
    }
}
