//! A population's rollout: `n_steps` steps of every trial's envs under its current policy, the actions drawn
//! from each trial's own noise stream, with nothing read back to the host. The envs are the stacked env
//! kernel of a search (`Kernel`) or, for a single run (a population of one), any `BatchEnv` (`OneEnv`).

use super::super::PpoError;
use super::{Population, draws};
use crate::env::kernel::TensorKernelEnv;
use crate::rl::BatchEnv;
use std::collections::VecDeque;
use tch::{Kind, Tensor};

/// The rollout of one update, `[T, P, E, ...]`, on the training device.
pub(in crate::rl::ppo) struct Rollout {
    pub(in crate::rl::ppo) obs: Tensor,
    pub(in crate::rl::ppo) actions: Tensor,
    pub(in crate::rl::ppo) log_probs: Tensor,
    pub(in crate::rl::ppo) values: Tensor,
    pub(in crate::rl::ppo) rewards: Tensor,
    pub(in crate::rl::ppo) dones: Tensor,
    pub(in crate::rl::ppo) last_value: Tensor,
}

/// The environments a rollout steps, every tensor shaped `[P, E, ...]` on the trainer's device.
pub(in crate::rl::ppo) trait Steps {
    /// The raw observations before the first step `[P, E, obs]`.
    fn first(&mut self) -> Result<Tensor, PpoError>;
    /// Applies `actions` `[P, E, A]`; returns the rewards and done flags `[P, E]` (f32, owned) and the raw
    /// observations after the step `[P, E, obs]`.
    fn step(&mut self, actions: &Tensor) -> Result<(Tensor, Tensor, Tensor), PpoError>;
}

/// The stacked env kernel of a population's trials (`TensorKernelEnv::stack`).
pub(super) struct Kernel<'a>(pub(super) &'a mut TensorKernelEnv);

impl Kernel<'_> {
    /// `[P, E]`: trials, and envs per trial.
    fn dims(&self) -> (i64, i64) {
        (self.0.n_trials() as i64, self.0.trial_envs() as i64)
    }
}

impl Steps for Kernel<'_> {
    fn first(&mut self) -> Result<Tensor, PpoError> {
        let (p, e) = self.dims();
        Ok(self.0.obs().view([p, e, self.0.obs_dim() as i64]))
    }

    fn step(&mut self, actions: &Tensor) -> Result<(Tensor, Tensor, Tensor), PpoError> {
        self.0.set_actions(actions).and_then(|()| self.0.step()).map_err(PpoError::KernelStep)?;
        let (p, e) = self.dims();
        // The kernel overwrites its buffers at the next step: rewards and flags are copied out.
        Ok((self.0.reward().view([p, e]).copy(), self.0.done().view([p, e]).copy(), self.first()?))
    }
}

/// One `BatchEnv` for a single run: its envs are the one trial's; episodes that end on the host are counted
/// into the trainer's recent returns.
pub(in crate::rl::ppo) struct OneEnv<'a, E: BatchEnv + ?Sized> {
    pub(in crate::rl::ppo) env: &'a mut E,
    pub(in crate::rl::ppo) device: tch::Device,
    /// The last 20 finished episodes' returns, and the count of episodes.
    pub(in crate::rl::ppo) recent: &'a mut VecDeque<f64>,
    pub(in crate::rl::ppo) episodes: &'a mut u64,
}

impl<E: BatchEnv + ?Sized> Steps for OneEnv<'_, E> {
    fn first(&mut self) -> Result<Tensor, PpoError> {
        Ok(self.env.reset().f_to_device(self.device)?.f_to_kind(Kind::Float)?.f_unsqueeze(0)?)
    }

    fn step(&mut self, actions: &Tensor) -> Result<(Tensor, Tensor, Tensor), PpoError> {
        let step = self.env.step(&actions.f_squeeze_dim(0)?.f_to_device(self.env.device())?)?;
        for ret in &step.finished {
            self.recent.push_back(*ret);
            if self.recent.len() > 20 {
                self.recent.pop_front();
            }
            *self.episodes += 1;
        }
        let here = |t: &Tensor| t.f_to_device(self.device)?.f_to_kind(Kind::Float)?.f_unsqueeze(0);
        Ok((here(&step.reward)?, here(&step.done)?, here(&step.obs)?))
    }
}

impl Population {
    /// `n_steps` steps of every trial's `e` envs, trial k's noise stream at its update `updates[k]`. Each
    /// rollout continues from the last one's final observations; the first starts from `steps.first()`.
    pub(in crate::rl::ppo) fn collect(
        &mut self,
        steps: &mut dyn Steps,
        e: i64,
        updates: &Tensor,
    ) -> Result<Rollout, PpoError> {
        let (p, a, t_len) = (self.len() as i64, self.act_dim, self.shape().n_steps);
        let mut obs = match self.next_obs.take() {
            Some(o) => o,
            None => {
                let raw = steps.first()?;
                self.observe(&raw)
            }
        };
        // Each trial's noise stream continues where its last rollout stopped.
        let start = updates * t_len as i64;
        let (mut o, mut ac, mut lp, mut v, mut r, mut d) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for t in 0..t_len {
            let counter = &start + t as i64;
            let (action, log_prob, value) = tch::no_grad(|| {
                let (mean, value) = self.forward(&obs);
                let noise = draws::normals(&self.seeds, &counter, e * a).view([p, e, a]);
                let action = &mean + self.log_std().exp().unsqueeze(1) * noise;
                let log_prob = self.log_prob(&mean, &action);
                (action, log_prob, value)
            });
            let (reward, done, next) = steps.step(&action)?;
            o.push(obs);
            ac.push(action);
            lp.push(log_prob);
            v.push(value);
            r.push(reward);
            d.push(done);
            obs = self.observe(&next);
        }
        let last_value = tch::no_grad(|| self.values(&obs));
        self.next_obs = Some(obs.shallow_clone());
        Ok(Rollout {
            obs: Tensor::stack(&o, 0),
            actions: Tensor::stack(&ac, 0),
            log_probs: Tensor::stack(&lp, 0),
            values: Tensor::stack(&v, 0),
            rewards: Tensor::stack(&r, 0),
            dones: Tensor::stack(&d, 0),
            last_value,
        })
    }
}
