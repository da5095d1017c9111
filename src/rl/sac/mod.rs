//! Soft actor-critic (Haarnoja et al. 2018, with the automatically tuned temperature) on a `BatchEnv`, all
//! on the training device: the replay buffer is a ring of tensors there (`buffer`), the twin Q critics
//! have Polyak-averaged target copies, the actor is a tanh-squashed Gaussian, and the entropy temperature
//! `alpha = exp(log alpha)` is learned towards the target entropy `-action_dim`.
//!
//! Per step of the E environments: act (uniformly random during `sac.warmup_steps`, then sampled from the
//! actor), store the E transitions, and once warmed up take `sac.updates_per_step` gradient steps, each:
//! the critics towards `r + gamma (1 - done) (min Q'(s', a') - alpha log pi(a'|s'))`, the actor to
//! maximise `min Q(s, a) - alpha log pi(a|s)`, `log alpha` to bring the entropy to its target, then the
//! targets towards the critics. A `done` (terminated or truncated; `BatchEnv` does not tell them apart)
//! ends the bootstrap. Observations are normalised with running statistics (frozen into the export);
//! the buffer keeps them raw, so a batch is normalised with the statistics of its update.

mod buffer;
mod nets;

pub use crate::config::SacConfig;

use super::BatchEnv;
use super::ppo::RunningNorm;
use crate::env::rng::SplitMix64;
use crate::ml::optim::Adam;
use crate::onnx::mlp::{MlpPolicy, Squash};
use buffer::Replay;
use nets::{Actor, TwinQ, polyak};
use std::collections::VecDeque;
use std::time::Instant;
use tch::{Device, Kind, Tensor, nn};

/// Finished episodes the reported mean return is taken over.
const RECENT: usize = 20;

/// Why a SAC trainer could not be built or a step failed; training stops with it.
#[derive(Debug, thiserror::Error)]
pub enum SacError {
    /// The settings do not fit (a `[sac]` value out of range, or a buffer smaller than one step of the envs).
    #[error("invalid SAC configuration: {0}")]
    Config(String),
    /// The environment's observation or action size differs from the policy's.
    #[error("the environment has {env} {what} but the policy expects {policy}")]
    Shape {
        /// `observations` or `actions`.
        what: &'static str,
        /// The environment's size.
        env: usize,
        /// The policy's size.
        policy: usize,
    },
    /// A loss or statistic (named) became NaN or infinite after that many environment steps.
    #[error("training diverged: {0} is not finite after {1} env steps; lower sac.*_learning_rate or check the rewards")]
    Diverged(&'static str, u64),
    /// A step of the environments failed.
    #[error("the training environment failed: {0}")]
    Env(#[from] super::StepError),
    /// A tensor operation failed in libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// What a stretch of training did, for progress reports and tests.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SacStats {
    /// Environment steps so far, all envs counted (the warm-up's included).
    pub env_steps: u64,
    /// Gradient steps so far.
    pub updates: u64,
    /// Environment steps per second of wall time over the stretch.
    pub steps_per_sec: f64,
    /// Mean return of the last (up to) 20 finished episodes.
    pub mean_return: Option<f64>,
    /// Episodes finished so far.
    pub episodes: u64,
    /// The last update's critic loss: the two critics' mean squared errors against the soft TD target, summed.
    pub critic_loss: f64,
    /// The last update's actor loss (`alpha × log pi − min Q`).
    pub actor_loss: f64,
    /// The entropy temperature of the last update.
    pub alpha: f64,
    /// The policy's entropy estimate, `-mean log pi(a|s)` over the last batch.
    pub entropy: f64,
}

/// A SAC trainer: the actor, twin critics and their Polyak targets, the entropy temperature, the replay buffer on the
/// device and the observation statistics.
pub struct Sac {
    /// The `[sac]` settings it trains with (checked at `new`).
    pub cfg: SacConfig,
    /// The trained variables: the actor, the critics, the temperature, the observation statistics and the optimisers'
    /// state.
    pub vs: nn::VarStore,
    /// The target critics' variables (never trained; Polyak-averaged).
    target_vs: nn::VarStore,
    actor: Actor,
    critic: TwinQ,
    target: TwinQ,
    log_alpha: Tensor,
    /// The running observation statistics (frozen into the exported ONNX graph, as PPO's).
    pub norm: RunningNorm,
    actor_adam: Adam,
    critic_adam: Adam,
    alpha_adam: Adam,
    buffer: Replay,
    target_entropy: f64,
    obs_dim: usize,
    act_dim: usize,
    /// Environment steps so far, all envs counted.
    pub env_steps: u64,
    /// Gradient steps so far.
    pub updates: u64,
    recent: VecDeque<f64>,
    episodes: u64,
    /// The trainer's own generator: the warm-up's actions, the actor's noise and the batches' rows, so
    /// that a run is its seed's alone whatever else draws from libtorch's one generator (another trainer
    /// on another thread).
    rng: SplitMix64,
    /// The last update's critic loss, actor loss, alpha and entropy, on the device (read per report).
    last: Option<Tensor>,
}

impl Sac {
    /// A trainer on `device` for `n_envs` envs with observations of `obs_dim` and actions of `act_dim` values; refuses
    /// an invalid `cfg` or a replay buffer that cannot hold one step of the envs.
    pub fn new(cfg: SacConfig, obs_dim: usize, act_dim: usize, n_envs: usize, device: Device) -> Result<Sac, SacError> {
        cfg.validate().map_err(|e| SacError::Config(e.to_string()))?;
        let cfg_seed = cfg.seed;
        if n_envs > cfg.buffer_size {
            return Err(SacError::Config(format!(
                "sac.buffer_size = {} is below env.n_envs = {n_envs}: one step of the envs must fit; grow the buffer",
                cfg.buffer_size
            )));
        }
        let vs = nn::VarStore::new(device);
        let target_vs = nn::VarStore::new(device);
        let bounds = (cfg.log_std_min, cfg.log_std_max);
        let dims = (obs_dim, act_dim);
        let (actor, critic, target) = crate::ml::seeded::seeded(cfg.seed, || {
            let actor = Actor::new(&(vs.root() / "pi"), dims, &cfg.hidden, cfg.activation, bounds);
            let critic = TwinQ::new(&(vs.root() / "q"), dims, &cfg.hidden, cfg.activation);
            let target = TwinQ::new(&(target_vs.root() / "q_target"), dims, &cfg.hidden, cfg.activation);
            (actor, critic, target)
        });
        tch::no_grad(|| target.flat.shallow_clone().copy_(&critic.flat));
        let log_alpha = vs.root().var("log_alpha", &[1], nn::Init::Const(cfg.initial_alpha.ln()));
        let norm = RunningNorm::new(&(vs.root() / "obs_norm"), obs_dim, cfg.obs_clip);
        let actor_adam =
            Adam::new(&(vs.root() / "pi"), vec![actor.flat.shallow_clone()], crate::ml::optim::TORCH_EPS, 0.0);
        let critic_adam =
            Adam::new(&(vs.root() / "q"), vec![critic.flat.shallow_clone()], crate::ml::optim::TORCH_EPS, 0.0);
        let alpha_adam =
            Adam::new(&(vs.root() / "alpha"), vec![log_alpha.shallow_clone()], crate::ml::optim::TORCH_EPS, 0.0);
        let buffer = Replay::new(cfg.buffer_size, obs_dim, act_dim, device);
        Ok(Sac {
            target_entropy: -(act_dim as f64),
            cfg,
            vs,
            target_vs,
            actor,
            critic,
            target,
            log_alpha,
            norm,
            actor_adam,
            critic_adam,
            alpha_adam,
            buffer,
            obs_dim,
            act_dim,
            env_steps: 0,
            updates: 0,
            recent: VecDeque::new(),
            episodes: 0,
            rng: SplitMix64::new(cfg_seed ^ 0x5AC0_5AC0),
            last: None,
        })
    }

    /// The variables a SAC policy's training state keeps (`training::sac_warm`), by name, in name order:
    /// the actor, the twin critics and their targets, the temperature and the observation statistics; not
    /// the optimisers' state, nor the replay buffer. Each shares its storage with the trainer's.
    pub fn state_variables(&self) -> Vec<(String, Tensor)> {
        let optimiser = |name: &str| name.split('.').any(|part| part == "adam");
        let mut vars: Vec<(String, Tensor)> = self.vs.variables().into_iter().filter(|(n, _)| !optimiser(n)).collect();
        vars.extend(self.target_vs.variables());
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        vars
    }

    /// The device it trains on.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// The temperature `alpha` now.
    pub fn alpha(&self) -> f64 {
        self.log_alpha.exp().double_value(&[0])
    }

    fn normalize(&self, raw: &Tensor) -> Tensor {
        if self.cfg.normalize_obs { self.norm.normalize(raw) } else { raw.shallow_clone() }
    }

    /// The deterministic action `tanh(mean)` for raw observations `[N, obs_dim]`.
    pub fn act_deterministic(&self, raw: &Tensor) -> Tensor {
        tch::no_grad(|| {
            let raw = raw.to_device(self.device()).to_kind(Kind::Float);
            self.actor.deterministic(&self.normalize(&raw))
        })
    }

    /// Trains for `total_steps` environment steps (all envs counted, rounded up to whole steps of the
    /// envs). Every `report_every` env steps (and at the end) `on_report` sees the statistics and returns
    /// `false` to stop early.
    pub fn train<E: BatchEnv + ?Sized>(
        &mut self,
        env: &mut E,
        total_steps: u64,
        report_every: u64,
        mut on_report: impl FnMut(&SacStats) -> bool,
    ) -> Result<(), SacError> {
        if env.obs_dim() != self.obs_dim {
            return Err(SacError::Shape { what: "observations", env: env.obs_dim(), policy: self.obs_dim });
        }
        if env.act_dim() != self.act_dim {
            return Err(SacError::Shape { what: "actions", env: env.act_dim(), policy: self.act_dim });
        }
        let n = env.num_envs() as u64;
        let device = self.device();
        let mut obs = env.reset().to_device(device).to_kind(Kind::Float);
        if self.cfg.normalize_obs {
            self.norm.update(&obs);
        }
        let end = self.env_steps + total_steps.max(1);
        let (mut started, mut since) = (Instant::now(), 0u64);
        while self.env_steps < end {
            let action = self.act(&obs);
            let step = env.step(&action.to_device(env.device()))?;
            let next = step.obs.to_device(device).to_kind(Kind::Float);
            self.buffer.push(&obs, &action, &step.reward, &next, &step.done);
            if self.cfg.normalize_obs {
                self.norm.update(&next);
            }
            obs = next;
            for ret in step.finished {
                self.recent.push_back(ret);
                if self.recent.len() > RECENT {
                    self.recent.pop_front();
                }
                self.episodes += 1;
            }
            self.env_steps += n;
            since += n;
            if self.env_steps >= self.cfg.warmup_steps && self.buffer.len() >= self.cfg.batch_size {
                for _ in 0..self.cfg.updates_per_step {
                    self.last = Some(self.update());
                    self.updates += 1;
                }
            }
            if since >= report_every || self.env_steps >= end {
                let stats = self.stats(since as f64 / started.elapsed().as_secs_f64().max(1e-9))?;
                (started, since) = (Instant::now(), 0);
                if !on_report(&stats) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The envs' actions for raw observations: uniform in [-1, 1] while warming up, else sampled.
    fn act(&mut self, obs: &Tensor) -> Tensor {
        let rows = obs.size()[0];
        if self.env_steps < self.cfg.warmup_steps {
            let n = rows as usize * self.act_dim;
            let v: Vec<f32> = (0..n).map(|_| self.rng.uniform(-1.0, 1.0) as f32).collect();
            return Tensor::from_slice(&v).view([rows, self.act_dim as i64]).to_device(self.device());
        }
        let eps = self.normal(rows);
        tch::no_grad(|| self.actor.sample(&self.normalize(obs), &eps).0)
    }

    /// `[rows, act_dim]` standard normal draws (Box-Muller over the trainer's generator), on the device.
    fn normal(&mut self, rows: i64) -> Tensor {
        let n = rows as usize * self.act_dim;
        let mut v = Vec::with_capacity(n + 1);
        while v.len() < n {
            let (u1, u2) = (1.0 - self.rng.next_f64(), self.rng.next_f64());
            let (r, t) = ((-2.0 * u1.ln()).sqrt(), std::f64::consts::TAU * u2);
            v.extend([(r * t.cos()) as f32, (r * t.sin()) as f32]);
        }
        v.truncate(n);
        Tensor::from_slice(&v).view([rows, self.act_dim as i64]).to_device(self.device())
    }

    /// One gradient step of the critics, the actor and the temperature, then the targets. Returns the
    /// detached critic loss, actor loss, alpha and entropy `[4]`.
    fn update(&mut self) -> Tensor {
        let len = self.buffer.len();
        let rows: Vec<i64> = (0..self.cfg.batch_size).map(|_| self.rng.below(len) as i64).collect();
        let b = self.buffer.sample(&rows);
        let bs = self.cfg.batch_size as i64;
        let (eps_next, eps_now) = (self.normal(bs), self.normal(bs));
        let (o, o2) = (self.normalize(&b.obs), self.normalize(&b.next_obs));
        let alpha = self.log_alpha.exp().detach();
        let y: Tensor = tch::no_grad(|| {
            let (a2, lp2) = self.actor.sample(&o2, &eps_next);
            let soft = self.target.forward(&o2, &a2).amin(0, false) - &alpha * lp2;
            &b.reward + (1.0 - &b.done) * self.cfg.gamma * soft
        });
        // The two critics' squared errors, summed.
        let q = self.critic.forward(&o, &b.act);
        let critic_loss = (q - y.unsqueeze(0)).square().mean(Kind::Float) * 2.0;
        self.critic_adam.zero_grad();
        critic_loss.backward();
        self.critic_adam.step(self.cfg.critic_learning_rate);

        // The actor's loss goes through the critics, but only the actor learns from it: the critics' one
        // flat vector stops asking for a gradient meanwhile, so the backward pass skips their weight
        // gradients (the next critic step zeroes them unread anyway: the same update, less work).
        let (a, lp) = self.actor.sample(&o, &eps_now);
        let _ = self.critic.flat.set_requires_grad(false);
        let q_pi = self.critic.forward(&o, &a).amin(0, false);
        let actor_loss = (&alpha * &lp - q_pi).mean(Kind::Float);
        self.actor_adam.zero_grad();
        actor_loss.backward();
        let _ = self.critic.flat.set_requires_grad(true);
        self.actor_adam.step(self.cfg.actor_learning_rate);

        let lp = lp.detach();
        let alpha_loss = -(&self.log_alpha * (&lp + self.target_entropy)).mean(Kind::Float);
        self.alpha_adam.zero_grad();
        alpha_loss.backward();
        self.alpha_adam.step(self.cfg.alpha_learning_rate);

        polyak(&self.target.flat, &self.critic.flat, self.cfg.tau);
        tch::no_grad(|| {
            Tensor::cat(
                &[
                    critic_loss.detach().reshape([1]),
                    actor_loss.detach().reshape([1]),
                    alpha.reshape([1]),
                    -lp.mean(Kind::Float).reshape([1]),
                ],
                0,
            )
        })
    }

    fn stats(&self, steps_per_sec: f64) -> Result<SacStats, SacError> {
        let [critic_loss, actor_loss, alpha, entropy] = match &self.last {
            Some(t) => {
                let v = crate::ml::readback::f64s(&t.to_kind(Kind::Double))?;
                [v[0], v[1], v[2], v[3]]
            }
            None => [0.0, 0.0, self.alpha(), 0.0],
        };
        if !(critic_loss.is_finite() && actor_loss.is_finite()) {
            return Err(SacError::Diverged("the loss", self.env_steps));
        }
        let mean_return = (!self.recent.is_empty()).then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64);
        Ok(SacStats {
            env_steps: self.env_steps,
            updates: self.updates,
            steps_per_sec,
            mean_return,
            episodes: self.episodes,
            critic_loss,
            actor_loss,
            alpha,
            entropy,
        })
    }

    /// The deterministic policy (the Gaussian's mean, squashed by tanh) as plain weights for the ONNX
    /// writer, normalisation included: the PPO policy's contract (input `obs [-1, D]`, output
    /// `action [-1, A]`, each in [-1, 1]), so that the engine serves it through the same path.
    pub fn export_policy(&self) -> Result<MlpPolicy, SacError> {
        let (hidden, head) = self.actor.policy_layers()?;
        let norm = if self.cfg.normalize_obs { Some(self.norm.frozen()?) } else { None };
        Ok(MlpPolicy { norm, hidden, activation: self.actor.activation, head, squash: Squash::Tanh })
    }
}

#[cfg(test)]
mod tests;
