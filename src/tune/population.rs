//! A search's trials trained as populations (`rl::ppo::population`): the trials proposed in one wave that
//! share a shape (network, rollout, minibatches: `GroupKey`) form a group whose envs step in one
//! kernel launch and whose networks run as one batched forward and backward. A group's members started
//! together, so they reach each rung together: a wave trains the group to its next rung, copies each
//! trial back into its own trainer and judges it by its own validation backtest. Trials the search stops
//! leave the group (`keep`); new trials form new groups.

use super::trial::{Shared, Trial, TrialFailure};
use crate::config::{Config, PpoShape};
use crate::env::kernel::TensorKernelEnv;
use crate::rl::ppo::population::Population;
use rayon::prelude::*;
use std::time::Instant;

pub(super) struct Group {
    pub members: Vec<Trial>,
    pop: Population,
    env: TensorKernelEnv,
}

/// What the trials that train together share: the PPO shape (`PpoShape`: a new `[ppo]` field must be put
/// in the shape or in the tuned values, or `PpoConfig::split` does not compile) and the env count.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupKey {
    pub shape: PpoShape,
    pub n_envs: usize,
}

impl GroupKey {
    pub(super) fn of(config: &Config) -> GroupKey {
        GroupKey { shape: config.ppo.shape(), n_envs: config.env.n_envs }
    }
}

impl Group {
    /// Groups of `trials` (with their envs) by shape, in their numbers' order. Trials that cannot join
    /// a group come back with the reason.
    pub(super) fn form(trials: Vec<(Trial, TensorKernelEnv)>) -> (Vec<Group>, Vec<(Trial, String)>) {
        let mut by_key: Vec<(GroupKey, Vec<(Trial, TensorKernelEnv)>)> = Vec::new();
        for (t, env) in trials {
            let k = GroupKey::of(&t.config);
            match by_key.iter_mut().find(|(g, _)| *g == k) {
                Some((_, v)) => v.push((t, env)),
                None => by_key.push((k, vec![(t, env)])),
            }
        }
        let (mut groups, mut refused) = (Vec::new(), Vec::new());
        for (_, v) in by_key {
            let (members, envs): (Vec<Trial>, Vec<TensorKernelEnv>) = v.into_iter().unzip();
            let ppos: Vec<_> = members.iter().filter_map(Trial::ppo).collect();
            if ppos.len() < members.len() {
                // Only PPO trials get an env kernel to stack (`Trial::new`): a SAC one here is a bug.
                refused.extend(members.into_iter().map(|t| (t, "a SAC trial trains alone".to_string())));
                continue;
            }
            match (Population::new(&ppos), TensorKernelEnv::stack(envs)) {
                (Ok(pop), Ok(env)) => groups.push(Group { members, pop, env }),
                (Err(e), _) => refused.extend(members.into_iter().map(|t| (t, e.to_string()))),
                (_, Err(e)) => refused.extend(members.into_iter().map(|t| (t, e.to_string()))),
            }
        }
        (groups, refused)
    }

    /// Trains every member to its next rung (they share it), then copies each back into its trainer and
    /// validates it, the backtests spread over `pool`. Each member's `outcome` says how it went; past the
    /// deadline the training stops where it is and nothing is judged.
    pub(super) fn advance(&mut self, shared: &Shared, pool: &rayon::ThreadPool) {
        let started = Instant::now();
        for t in &mut self.members {
            t.outcome = None;
        }
        if shared.deadline.is_some_and(|d| started >= d) {
            return;
        }
        let Some(first) = self.members.first() else { return };
        let (Some(&stop_at), Some(&end)) = (first.rung_updates.get(first.next_rung), first.rung_updates.last()) else {
            return;
        };
        // Two rungs that round to the same update count: each member's value there is already known.
        if self.pop.updates.first().is_some_and(|&u| u >= stop_at) {
            for t in &mut self.members {
                let known = t.rec.curve.last().filter(|r| r.steps == t.learner.env_steps()).map(|r| r.value);
                t.outcome = Some(known.ok_or(TrialFailure::NeverJudged));
            }
            return;
        }
        let mut failed: Vec<Option<TrialFailure>> = vec![None; self.members.len()];
        let mut late = false;
        while self.pop.updates.first().is_some_and(|&u| u < stop_at) && !late {
            let lrs: Vec<f64> = self
                .members
                .iter()
                .zip(&self.pop.updates)
                .map(|(t, &u)| {
                    let c = &t.config.ppo;
                    if c.anneal_lr { c.learning_rate * (1.0 - u as f64 / end.max(1) as f64) } else { c.learning_rate }
                })
                .collect();
            match self.pop.round(&mut self.env, &lrs) {
                Ok(outcomes) => {
                    for ((t, f), o) in self.members.iter_mut().zip(&mut failed).zip(outcomes) {
                        match o {
                            Ok(s) => t.last = Some(s),
                            Err(e) => {
                                f.get_or_insert_with(|| TrialFailure::Training(e.to_string()));
                            }
                        }
                    }
                }
                Err(e) => {
                    for t in &mut self.members {
                        t.outcome = Some(Err(TrialFailure::Population(e.to_string())));
                    }
                    return;
                }
            }
            late = shared.deadline.is_some_and(|d| Instant::now() >= d);
        }
        let seconds = started.elapsed().as_secs_f64();
        let reached = self.pop.updates.first().is_some_and(|&u| u >= stop_at);
        for (k, t) in self.members.iter_mut().enumerate() {
            t.seconds += seconds;
            let written = match t.ppo_mut() {
                Some(ppo) => self.pop.write_back(k, ppo).map_err(|e| e.to_string()),
                None => Err("a SAC trial has no place in a population".to_string()),
            };
            if let Err(e) = written {
                failed[k].get_or_insert(TrialFailure::WriteBack(e));
            }
        }
        if late && !reached {
            return;
        }
        pool.install(|| {
            self.members.par_iter_mut().zip(failed).for_each(|(t, f)| {
                t.outcome = Some(match f {
                    Some(e) => Err(e),
                    None => t.validate(shared).map_err(|e| TrialFailure::Validation(format!("{e:#}"))),
                });
            })
        });
    }

    /// Keeps the members at positions `keep` (ascending, with `members` already reduced to them); an empty
    /// `keep` ends the group (`false`).
    pub(super) fn keep(&mut self, keep: &[usize]) -> anyhow::Result<bool> {
        if keep.is_empty() {
            return Ok(false);
        }
        if keep.len() < self.pop.len() {
            self.pop.keep(keep)?;
            self.env.keep(keep)?;
        }
        Ok(true)
    }

    /// The members' numbers, for the log.
    pub(super) fn numbers(&self) -> String {
        self.members.iter().map(|t| t.rec.number.to_string()).collect::<Vec<_>>().join(", ")
    }
}
