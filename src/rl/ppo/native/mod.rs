//! PPO on the CPU in plain Rust: the same algorithm as the tch code in `mod.rs`, over the same weights,
//! without libtorch's per-operation dispatch.
//!
//! With SB3's default work (one env, [64, 64] networks, minibatches of 64) every tensor is tiny, and
//! libtorch spends most of a minibatch dispatching some 300 operations (forward, autograd, clipping,
//! Adam per parameter tensor). Here a minibatch is six small GEMMs forward and twelve backward (on a CPU
//! with FMA an unpacked kernel with `matrixmultiply`'s bits, `fma_gemm`; elsewhere `ndarray`'s
//! `general_mat_mul`), a hand-written backward of the PPO loss, and one pass of Adam over one flat
//! parameter vector. The rollout steps the environment in host memory (`BatchEnv::step_host`).
//!
//! The arithmetic mirrors the tch path: the same loss (clipped surrogate, clipped value loss, entropy
//! bonus on the clamped log-std), torch's subgradients at the kinks (`minimum`/`maximum` split a tie in
//! half; `clamp` passes the gradient on its closed interval), the global gradient-norm clip with torch's
//! `1e-6`, and libtorch's Adam formula. `tests.rs` checks the two against each other step by step. The
//! parameters live in one flat vector in the order of `ActorCritic::parameters()`, which is also the
//! order of the checkpointed Adam moments, so either backend resumes the other's checkpoint.
//!
//! This file holds the trainer, its rollout and its epochs; `minibatch` one gradient step.

pub(super) use super::net::Layout;
use super::net::{Acts, forward};
use super::{PpoConfig, PpoError, UpdateStats};
use crate::ml::optim::{BETA1, BETA2, PPO_EPS as ADAM_EPS};
use crate::onnx::Activation;
use crate::rl::{BatchEnv, HostStep};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand_distr::{Distribution, StandardNormal};
use std::collections::VecDeque;

mod minibatch;

const HALF_LN_2PI: f32 = 0.918_938_5;

/// Running observation statistics in host memory (the same Chan update as `RunningNorm`, in f64).
#[derive(Debug, Clone)]
pub(super) struct HostNorm {
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
    pub count: f64,
    pub eps: f64,
    pub clip: f64,
}

impl HostNorm {
    /// Folds `n` rows of `x` (`[n * dim]`) into the statistics.
    fn update(&mut self, x: &[f32], n: usize) {
        let d = self.mean.len();
        if n == 0 || x.len() != n * d {
            return;
        }
        let nf = n as f64;
        let total = self.count + nf;
        for j in 0..d {
            let bm = (0..n).map(|i| x[i * d + j] as f64).sum::<f64>() / nf;
            let bv = (0..n).map(|i| (x[i * d + j] as f64 - bm).powi(2)).sum::<f64>() / nf;
            let delta = bm - self.mean[j];
            let m2 = self.var[j] * self.count + bv * nf + delta * delta * self.count * nf / total;
            self.mean[j] += delta * nf / total;
            self.var[j] = m2 / total;
        }
        self.count = total;
    }

    /// `clip((x - mean) / sqrt(var + eps), -clip, clip)` with the f32 statistics the ONNX graph holds.
    fn normalize(&self, x: &[f32], out: &mut Vec<f32>) {
        let d = self.mean.len();
        out.clear();
        out.extend(x.iter().enumerate().map(|(i, v)| {
            let (m, s) = (self.mean[i % d] as f32, ((self.var[i % d] as f32) + self.eps as f32).sqrt());
            ((v - m) / s).clamp(-self.clip as f32, self.clip as f32)
        }));
    }
}

/// One minibatch, `B` rows.
pub(super) struct Batch<'a> {
    pub obs: &'a [f32],
    pub actions: &'a [f32],
    pub old_log_prob: &'a [f32],
    pub old_value: &'a [f32],
    pub advantage: &'a [f32],
    pub returns: &'a [f32],
}

/// What one minibatch step measured.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct MbStats {
    pub loss: f64,
    pub policy_loss: f64,
    pub value_loss: f64,
    pub approx_kl: f64,
    pub clip_fraction: f64,
}

/// The rollout of one update, `[T, E, ...]` flattened.
#[derive(Default)]
struct Rollout {
    obs: Vec<f32>,
    actions: Vec<f32>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
    rewards: Vec<f32>,
    dones: Vec<f32>,
    last_value: Vec<f32>,
}

pub(super) struct Native {
    pub layout: Layout,
    pub params: Vec<f32>,
    grads: Vec<f32>,
    pub adam_m: Vec<f32>,
    pub adam_v: Vec<f32>,
    pub norm: HostNorm,
    activation: Activation,
    rng: StdRng,
    /// The current (normalised) observations `[E * obs_dim]`, carried from one update to the next.
    obs: Vec<f32>,
    raw: Vec<f32>,
    step: HostStep,
    ro: Rollout,
    pi: Acts,
    vf: Acts,
    grad_a: Vec<f32>,
    grad_b: Vec<f32>,
    adv: Vec<f32>,
    dmean: Vec<f32>,
    dvalue: Vec<f32>,
}

impl Native {
    pub(super) fn new(layout: Layout, cfg: &PpoConfig, params: Vec<f32>) -> Native {
        let d = layout.obs_dim;
        Native {
            grads: vec![0.0; layout.len],
            adam_m: vec![0.0; layout.len],
            adam_v: vec![0.0; layout.len],
            norm: HostNorm { mean: vec![0.0; d], var: vec![1.0; d], count: 1e-4, eps: 1e-8, clip: cfg.obs_clip },
            activation: cfg.activation,
            // The sampling and shuffling stream; the weights' initialisation is torch's, from the same seed.
            rng: StdRng::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15),
            layout,
            params,
            obs: Vec::new(),
            raw: Vec::new(),
            step: HostStep::default(),
            ro: Rollout::default(),
            pi: Acts::default(),
            vf: Acts::default(),
            grad_a: Vec::new(),
            grad_b: Vec::new(),
            adv: Vec::new(),
            dmean: Vec::new(),
            dvalue: Vec::new(),
        }
    }

    /// Restarts the sampling and shuffling stream for a run that begins at update `update` (a resumed run
    /// draws new noise, not the first run's again).
    pub(super) fn reseed(&mut self, seed: u64, update: u64) {
        self.rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15 ^ update.wrapping_mul(0xbf58_476d_1ce4_e5b9));
    }

    fn log_std(&self, cfg: &PpoConfig) -> Vec<f32> {
        let (lo, hi) = (cfg.log_std_min as f32, cfg.log_std_max as f32);
        self.params[self.layout.log_std..self.layout.log_std + self.layout.act_dim]
            .iter()
            .map(|v| v.clamp(lo, hi))
            .collect()
    }

    fn observe(&mut self, cfg: &PpoConfig, n: usize) {
        if cfg.normalize_obs {
            self.norm.update(&self.raw, n);
            self.norm.normalize(&self.raw, &mut self.obs);
        } else {
            self.obs.clone_from(&self.raw);
        }
    }

    /// Resets every environment and observes the first observations.
    pub(super) fn reset<E: BatchEnv + ?Sized>(&mut self, cfg: &PpoConfig, env: &mut E) -> Result<(), PpoError> {
        env.reset_host(&mut self.raw)?;
        let n = env.num_envs();
        if self.raw.len() != n * self.layout.obs_dim {
            return Err(PpoError::Shape {
                what: "observation values",
                env: self.raw.len(),
                policy: n * self.layout.obs_dim,
            });
        }
        self.observe(cfg, n);
        Ok(())
    }

    /// Rolls out `n_steps` × E transitions; finished episodes' returns go to `recent` (the last 20).
    pub(super) fn collect<E: BatchEnv + ?Sized>(
        &mut self,
        cfg: &PpoConfig,
        env: &mut E,
        recent: &mut VecDeque<f64>,
        episodes: &mut u64,
    ) -> Result<(), PpoError> {
        let (e, d, a) = (env.num_envs(), self.layout.obs_dim, self.layout.act_dim);
        let ls = self.log_std(cfg);
        let std: Vec<f32> = ls.iter().map(|v| v.exp()).collect();
        let lp_const: f32 = ls.iter().map(|l| l + HALF_LN_2PI).sum();
        let ro = &mut self.ro;
        ro.obs.reserve(cfg.n_steps * e * d);
        for buf in [&mut ro.obs, &mut ro.actions, &mut ro.log_probs, &mut ro.values, &mut ro.rewards, &mut ro.dones] {
            buf.clear();
        }
        let mut action = vec![0.0f32; e * a];
        for _ in 0..cfg.n_steps {
            forward(&self.params, &self.layout.actor, self.activation, &self.obs, e, &mut self.pi);
            forward(&self.params, &self.layout.critic, self.activation, &self.obs, e, &mut self.vf);
            let value = self.vf.0.last().map(Vec::as_slice).unwrap_or_default();
            let mean = self.pi.0.last().map(Vec::as_slice).unwrap_or_default();
            for i in 0..e {
                let mut sq = 0.0f32;
                for j in 0..a {
                    let z: f32 = StandardNormal.sample(&mut self.rng);
                    action[i * a + j] = mean[i * a + j] + std[j] * z;
                    sq += z * z;
                }
                self.ro.log_probs.push(-0.5 * sq - lp_const);
            }
            self.ro.obs.extend_from_slice(&self.obs);
            self.ro.actions.extend_from_slice(&action);
            self.ro.values.extend_from_slice(value);
            env.step_host(&action, &mut self.step)?;
            if self.step.obs.len() != e * d || self.step.reward.len() != e || self.step.done.len() != e {
                return Err(PpoError::Shape { what: "step values", env: self.step.obs.len(), policy: e * d });
            }
            for ret in &self.step.finished {
                recent.push_back(*ret);
                if recent.len() > 20 {
                    recent.pop_front();
                }
                *episodes += 1;
            }
            self.ro.rewards.extend_from_slice(&self.step.reward);
            self.ro.dones.extend_from_slice(&self.step.done);
            std::mem::swap(&mut self.raw, &mut self.step.obs);
            self.observe(cfg, e);
        }
        forward(&self.params, &self.layout.critic, self.activation, &self.obs, e, &mut self.vf);
        self.ro.last_value = self.vf.0.last().cloned().unwrap_or_default();
        Ok(())
    }

    /// GAE(λ) over the rollout: advantages `[T * E]`, the same recursion as the tch path.
    fn advantages(&self, cfg: &PpoConfig) -> Vec<f32> {
        let ro = &self.ro;
        let e = ro.last_value.len();
        let t_len = ro.rewards.len() / e.max(1);
        let (gamma, lambda) = (cfg.gamma as f32, cfg.gae_lambda as f32);
        let mut adv = vec![0.0f32; t_len * e];
        let mut last = vec![0.0f32; e];
        for t in (0..t_len).rev() {
            for (i, acc) in last.iter_mut().enumerate() {
                let k = t * e + i;
                let not_done = 1.0 - ro.dones[k];
                let next_value = if t + 1 == t_len { ro.last_value[i] } else { ro.values[k + e] };
                let delta = ro.rewards[k] + next_value * gamma * not_done - ro.values[k];
                *acc = delta + *acc * (gamma * lambda) * not_done;
                adv[k] = *acc;
            }
        }
        adv
    }

    /// `n_epochs` passes of shuffled minibatches over the rollout.
    pub(super) fn update(
        &mut self,
        cfg: &PpoConfig,
        lr: f64,
        adam_steps: &mut u64,
        update: u64,
    ) -> Result<UpdateStats, PpoError> {
        let adv = self.advantages(cfg);
        let ro = std::mem::take(&mut self.ro);
        let returns: Vec<f32> = adv.iter().zip(&ro.values).map(|(a, v)| a + v).collect();
        let n = adv.len();
        let (d, a) = (self.layout.obs_dim, self.layout.act_dim);
        let bs = cfg.batch_size.min(n).max(1);
        let mut perm: Vec<usize> = (0..n).collect();
        let (mut sum, mut batches, mut epochs_run) = (MbStats::default(), 0usize, 0usize);
        let mut gathered: [Vec<f32>; 6] = Default::default();
        let result = (|| {
            for _ in 0..cfg.n_epochs {
                epochs_run += 1;
                perm.shuffle(&mut self.rng);
                let (mut epoch_kl, mut epoch_batches) = (0.0, 0usize);
                for idx in perm.chunks(bs) {
                    for g in gathered.iter_mut() {
                        g.clear();
                    }
                    for &k in idx {
                        gathered[0].extend_from_slice(&ro.obs[k * d..(k + 1) * d]);
                        gathered[1].extend_from_slice(&ro.actions[k * a..(k + 1) * a]);
                        gathered[2].push(ro.log_probs[k]);
                        gathered[3].push(ro.values[k]);
                        gathered[4].push(adv[k]);
                        gathered[5].push(returns[k]);
                    }
                    let batch = Batch {
                        obs: &gathered[0],
                        actions: &gathered[1],
                        old_log_prob: &gathered[2],
                        old_value: &gathered[3],
                        advantage: &gathered[4],
                        returns: &gathered[5],
                    };
                    let s = self.minibatch(cfg, lr, adam_steps, &batch, update)?;
                    sum.loss += s.loss;
                    sum.policy_loss += s.policy_loss;
                    sum.value_loss += s.value_loss;
                    sum.approx_kl += s.approx_kl;
                    sum.clip_fraction += s.clip_fraction;
                    batches += 1;
                    epoch_kl += s.approx_kl;
                    epoch_batches += 1;
                }
                if let Some(target) = cfg.target_kl
                    && epoch_kl / epoch_batches.max(1) as f64 > 1.5 * target
                {
                    break;
                }
            }
            Ok::<(), PpoError>(())
        })();
        result?;
        let var = |x: &mut dyn Iterator<Item = f64>| {
            let v: Vec<f64> = x.collect();
            let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len().max(1) as f64
        };
        let var_ret = var(&mut returns.iter().map(|r| *r as f64));
        let var_resid = var(&mut returns.iter().zip(&ro.values).map(|(r, v)| (*r - *v) as f64));
        let entropy = self.log_std(cfg).iter().map(|l| (*l + HALF_LN_2PI + 0.5) as f64).sum();
        self.ro = ro;
        let sums = [sum.loss, sum.policy_loss, sum.value_loss, sum.approx_kl, sum.clip_fraction];
        super::update_stats(&[&sums[..], &[var_ret, var_resid, entropy]].concat(), batches, epochs_run, update + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_run_draws_new_noise_and_a_fresh_one_repeats() {
        let cfg = PpoConfig { hidden: vec![4], seed: 3, ..Default::default() };
        let mut n = Native::new(Layout::new(2, 1, &cfg.hidden), &cfg, Vec::new());
        let mut draws = |update: u64| {
            n.reseed(cfg.seed, update);
            (0..4).map(|_| StandardNormal.sample(&mut n.rng)).collect::<Vec<f32>>()
        };
        let (first, again, resumed) = (draws(0), draws(0), draws(7));
        assert_eq!(first, again);
        assert_ne!(first, resumed);
    }
}
