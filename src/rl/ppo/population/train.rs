//! A population's round: one rollout of every trial on the stacked env, then the epochs of minibatch steps,
//! each trial's loss reaching only its own weights; and a single run's update, a population of one's.

use super::super::{PpoError, UpdateStats, update_stats};
use super::rollout::{Kernel, OneEnv, Rollout};
use super::{Population, draws};
use crate::env::kernel::TensorKernelEnv;
use crate::ml::optim::{BETA1, BETA2, PPO_EPS, update_moments};
use crate::ml::readback::scalar;
use crate::rl::BatchEnv;
use std::time::Instant;
use tch::{Kind, Tensor};

/// How a trial's round went: its statistics, or why it diverged.
pub type MemberResult = Result<UpdateStats, PpoError>;

impl Population {
    /// One rollout and update of every trial on `env` (the trials' envs stacked in this order), trial k at
    /// learning rate `lrs[k]`. Reads the device twice: the update's statistics and the episode returns.
    pub fn round(&mut self, env: &mut TensorKernelEnv, lrs: &[f64]) -> Result<Vec<MemberResult>, PpoError> {
        let p = self.len();
        let e = env.trial_envs() as i64;
        if env.n_trials() != p || env.obs_dim() as i64 != self.obs_dim || env.n_assets() as i64 != self.act_dim {
            return Err(PpoError::Config(format!(
                "the population has {p} trials of {}x{}, the env {} trials of {}x{}",
                self.obs_dim,
                self.act_dim,
                env.n_trials(),
                env.obs_dim(),
                env.n_assets()
            )));
        }
        if lrs.len() != p {
            return Err(PpoError::Config(format!("{} learning rates for {p} trials", lrs.len())));
        }
        let started = Instant::now();
        // The round's only copies to the device: each trial's update count and learning rate.
        let updates: Vec<i64> = self.updates.iter().map(|&u| u as i64).collect();
        let updates = draws::column(&updates, self.device);
        let lr = Tensor::from_slice(lrs).to_device(self.device);
        let ro = self.collect(&mut Kernel(&mut *env), e, &updates)?;
        let stats = self.update(&ro, lrs, &updates, &lr)?;
        let returns = env.take_trial_returns()?;
        let per_update = (self.shape().n_steps as i64 * e) as u64;
        let seconds = started.elapsed().as_secs_f64().max(1e-9);
        Ok(stats
            .into_iter()
            .zip(returns)
            .enumerate()
            .map(|(k, (s, (sum, count)))| {
                // Every trial trained this round, a diverged one too (the population moves in step).
                self.updates[k] += 1;
                self.env_steps[k] += per_update;
                let mut s = s?;
                s.update = self.updates[k];
                s.env_steps = self.env_steps[k];
                s.learning_rate = lrs[k];
                s.steps_per_sec = per_update as f64 / seconds;
                s.mean_return = (count > 0.0).then(|| sum / count);
                s.episodes = count as u64;
                Ok(s)
            })
            .collect())
    }

    /// A single run's update (a population of one): one rollout on `env`, then the epochs at learning rate
    /// `lr`. Reads the device once (the statistics; once more an epoch with `ppo.target_kl`); the caller
    /// reads the env's returns.
    pub(in crate::rl::ppo) fn update_one<E: BatchEnv + ?Sized>(
        &mut self,
        env: &mut OneEnv<'_, E>,
        lr: f64,
    ) -> Result<UpdateStats, PpoError> {
        if self.len() != 1 {
            return Err(PpoError::Config(format!("a single run is a population of one, not of {}", self.len())));
        }
        let e = env.env.num_envs() as i64;
        let updates = draws::column(&[self.updates[0] as i64], self.device);
        let lr_t = Tensor::from_slice(&[lr]).to_device(self.device);
        let ro = self.collect(env, e, &updates)?;
        let stats = self.update(&ro, &[lr], &updates, &lr_t)?;
        self.updates[0] += 1;
        self.env_steps[0] += (self.shape().n_steps as i64 * e) as u64;
        match <[MemberResult; 1]>::try_from(stats) {
            Ok([one]) => one,
            Err(other) => Err(PpoError::Readback { values: 8 * other.len(), expected: 8 }),
        }
    }

    /// GAE(λ) `[T, P, E]` with each trial's γ and λ (`gae::gae_ops` with per-trial factors); a single run's
    /// on CUDA as one launch of the GAE kernel (its failure is the update's error).
    pub(in crate::rl::ppo) fn advantages(&self, ro: &Rollout) -> Result<Tensor, PpoError> {
        if let (Some(kernel), [one]) = (&self.gae, self.tuned.as_slice()) {
            let (t, e) = (ro.rewards.size()[0], ro.rewards.size()[2]);
            let flat = |x: &Tensor| x.view([t, e]);
            return kernel
                .advantages(
                    one.gamma,
                    one.gae_lambda,
                    &flat(&ro.rewards),
                    &flat(&ro.values),
                    &flat(&ro.dones),
                    &ro.last_value.view([e]),
                )
                .map(|adv| adv.view([t, 1, e]))
                .map_err(|err| PpoError::Device(format!("the GAE kernel failed: {err}")));
        }
        let (gamma, gl) = (&self.consts.gamma, &self.consts.gamma_lambda);
        let t_len = ro.rewards.size()[0];
        let mut adv = Vec::with_capacity(t_len as usize);
        let mut last = ro.last_value.zeros_like();
        for t in (0..t_len).rev() {
            let not_done = 1.0 - ro.dones.get(t);
            let next_value = if t + 1 == t_len { ro.last_value.shallow_clone() } else { ro.values.get(t + 1) };
            let delta = ro.rewards.get(t) + &next_value * gamma * &not_done - ro.values.get(t);
            last = delta + &last * gl * &not_done;
            adv.push(last.shallow_clone());
        }
        adv.reverse();
        Ok(Tensor::stack(&adv, 0))
    }

    pub(in crate::rl::ppo) fn update(
        &mut self,
        ro: &Rollout,
        lrs: &[f64],
        updates: &Tensor,
        lr: &Tensor,
    ) -> Result<Vec<MemberResult>, PpoError> {
        let p = self.len() as i64;
        let adv = tch::no_grad(|| self.advantages(ro))?;
        let returns = &adv + &ro.values;
        // [T, P, E, ...] -> [P, T * E, ...]
        let flat = |t: &Tensor| {
            let t = t.transpose(0, 1).contiguous();
            let n = t.size()[1] * t.size()[2];
            if t.dim() == 4 { t.view([p, n, -1]) } else { t.view([p, n]) }
        };
        let (obs, actions, old_lp, old_v, adv, returns) =
            (flat(&ro.obs), flat(&ro.actions), flat(&ro.log_probs), flat(&ro.values), flat(&adv), flat(&returns));
        let n = adv.size()[1];
        let device = self.device;
        // loss, policy loss, value loss, approximate KL, clip fraction: per trial, f64 sums.
        let mut sums = Tensor::zeros([p, 5], (Kind::Double, device));
        let bs = (self.shape().batch_size as i64).min(n);
        let (mut batches, mut epochs_run) = (0usize, 0);
        let epochs = self.shape().n_epochs;
        // A single run's early stop at `ppo.target_kl` (refused for several trials): the epoch's KL, summed.
        let target_kl = self.shape().target_kl;
        for epoch in 0..epochs {
            epochs_run += 1;
            let mut epoch_kl = Tensor::zeros([p], (Kind::Double, device));
            let counter = updates * epochs as i64 + epoch as i64;
            let perm = draws::permutations(&self.seeds, &counter, n);
            for start in (0..n).step_by(bs as usize) {
                let idx = perm.narrow(1, start, bs.min(n - start));
                let rows = |t: &Tensor| t.gather(1, &idx, false);
                let wide = |t: &Tensor| {
                    let d = t.size()[2];
                    t.gather(1, &idx.unsqueeze(-1).expand([-1, -1, d], false), false)
                };
                let batch = [wide(&obs), wide(&actions), rows(&old_lp), rows(&old_v), rows(&adv), rows(&returns)];
                let s = self.minibatch(&batch, lr);
                if target_kl.is_some() {
                    epoch_kl += s.select(1, 3);
                }
                sums += s;
                batches += 1;
            }
            let per_batch = (n as u64).div_ceil(bs as u64) as f64;
            if let Some(target) = target_kl
                && scalar(&epoch_kl.sum(Kind::Double))? / per_batch > 1.5 * target
            {
                break;
            }
        }
        let tail = tch::no_grad(|| {
            let var = |t: &Tensor| t.var_dim(1, false, false).to_kind(Kind::Double);
            Tensor::stack(&[var(&returns), var(&(&returns - &old_v)), self.entropy().to_kind(Kind::Double)], 1)
        });
        let all = Tensor::cat(&[&sums, &tail], 1);
        let v = crate::ml::readback::f64s(&all)?;
        if v.len() != 8 * p as usize {
            return Err(PpoError::Readback { values: v.len(), expected: 8 * p as usize });
        }
        Ok(v.chunks(8)
            .enumerate()
            .map(|(k, row)| {
                let mut s = update_stats(row, batches, epochs_run, self.updates[k] + 1)?;
                s.learning_rate = lrs[k];
                Ok(s)
            })
            .collect())
    }

    /// One gradient step of every trial on its minibatch `[obs, actions, old log-prob, old value, advantage,
    /// return]` (each `[P, B, ...]`); returns `[P, 5]`: loss, policy loss, value loss, KL, clip fraction (f64).
    pub(in crate::rl::ppo) fn minibatch(&mut self, b: &[Tensor; 6], lr: &Tensor) -> Tensor {
        let [o, a, olp, ov, ad, ret] = b;
        let c = self.shape().clone();
        let mut ad = ad.shallow_clone();
        if c.normalize_advantage && ad.size()[1] > 1 {
            ad = (&ad - ad.mean_dim(1, true, Kind::Float)) / (ad.std_dim(1, true, true) + 1e-8);
        }
        let (mean, value) = self.forward(o);
        let log_ratio = self.log_prob(&mean, a) - olp;
        let ratio = log_ratio.exp();
        let clip = self.consts.clip.shallow_clone();
        let clipped = ratio.maximum(&(1.0 - &clip)).minimum(&(&clip + 1.0));
        let pg = -(&ratio * &ad).min_other(&(clipped * &ad)).mean_dim(1, false, Kind::Float);
        let vl = match c.clip_range_vf {
            Some(r) => {
                let clipped = ov + (&value - ov).clamp(-r, r);
                (&value - ret).square().max_other(&(clipped - ret).square()).mean_dim(1, false, Kind::Float) * 0.5
            }
            None => (&value - ret).square().mean_dim(1, false, Kind::Float) * 0.5,
        };
        let entropy = self.entropy();
        let loss = &pg + &vl * &self.consts.vf - &entropy * &self.consts.ent;
        for t in &mut self.params {
            t.zero_grad();
        }
        // The sum of the trials' losses: each trial's weights get exactly their own loss's gradient.
        loss.sum(Kind::Float).backward();
        self.clip_and_step(lr);
        tch::no_grad(|| {
            let kl = ((&ratio - 1.0) - &log_ratio).mean_dim(1, false, Kind::Float);
            let cf = (&ratio - 1.0).abs().gt_tensor(&clip).to_kind(Kind::Float).mean_dim(1, false, Kind::Float);
            Tensor::stack(&[loss.detach(), pg.detach(), vl.detach(), kl, cf], 1).to_kind(Kind::Double)
        })
    }

    /// Each trial's gradients clipped to its own global norm limit, then its own Adam step at its learning
    /// rate `lr` (`[P]`, f64); the bias corrections from each trial's step count on the device.
    fn clip_and_step(&mut self, lr: &Tensor) {
        let p = self.len() as i64;
        tch::no_grad(|| {
            let grads: Vec<Tensor> = self.params.iter().map(Tensor::grad).collect();
            let norms: Vec<Tensor> =
                grads.iter().map(|g| g.reshape([p, -1]).square().sum_dim_intlist(1, false, Kind::Float)).collect();
            let total = Tensor::stack(&norms, 1).sum_dim_intlist(1, false, Kind::Float).sqrt().to_kind(Kind::Double);
            let coef = (&self.consts.max_grad_norm / (total + 1e-6)).clamp_max(1.0).to_kind(Kind::Float);
            for s in &mut self.adam_steps {
                *s += 1;
            }
            self.adam_t += 1.0;
            let bc1: Tensor = Tensor::pow_scalar(BETA1, &self.adam_t).neg() + 1.0;
            let bc2: Tensor = Tensor::pow_scalar(BETA2, &self.adam_t).neg() + 1.0;
            let step: Tensor = (lr.to_kind(Kind::Double).neg() / &bc1).to_kind(Kind::Float);
            let bc2 = bc2.sqrt().to_kind(Kind::Float);
            let eps = PPO_EPS;
            for ((param, g), (m, v)) in self.params.iter_mut().zip(&grads).zip(self.m.iter_mut().zip(self.v.iter_mut()))
            {
                let shape: Vec<i64> = std::iter::once(p).chain(std::iter::repeat_n(1, g.dim() - 1)).collect();
                let g = g * coef.view(shape.as_slice());
                update_moments(m, v, &g);
                let denom = v.sqrt() / bc2.view(shape.as_slice()) + eps;
                let _ = param.g_add_(&(&*m / denom * step.view(shape.as_slice())));
            }
        });
    }
}
