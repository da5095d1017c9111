//! What a trial trains: PPO, or SAC where the search covers the algorithm (`tune.algorithms`). Both
//! export the same policy contract (`obs -> action`), so a trial of either is validated by the same
//! backtest and its model registered the same way (the manifest names its algorithm).

use crate::config::Config;
use crate::models::Manifest;
use crate::rl::ppo::{Ppo, UpdateStats};
use crate::rl::sac::{Sac, SacStats};
use crate::training::device::Ran;
use crate::training::{ppo as train_ppo, sac as train_sac};
use chrono::NaiveDate;

/// A trial's trainer (boxed: a trainer is large, and a trial moves between threads and populations).
pub(super) enum Learner {
    Ppo(Box<Ppo>),
    /// SAC and its last statistics.
    Sac(Box<SacLearner>),
}

pub(super) struct SacLearner {
    pub sac: Sac,
    pub last: Option<SacStats>,
}

impl Learner {
    pub(super) fn env_steps(&self) -> u64 {
        match self {
            Learner::Ppo(p) => p.env_steps,
            Learner::Sac(l) => l.sac.env_steps,
        }
    }

    /// The mean return of the last finished training episodes, where any finished.
    pub(super) fn mean_return(&self, ppo_last: Option<&UpdateStats>) -> Option<f64> {
        match self {
            Learner::Ppo(_) => ppo_last.and_then(|l| l.mean_return),
            Learner::Sac(l) => l.last.as_ref().and_then(|s| s.mean_return),
        }
    }

    /// The policy as it is now: its ONNX bytes (not checked against ONNX Runtime: a trial's validation)
    /// and its manifest's draft.
    pub(super) fn export(
        &self,
        config: &Config,
        dates: (NaiveDate, NaiveDate),
        ppo_last: Option<&UpdateStats>,
        seconds: f64,
    ) -> anyhow::Result<(Vec<u8>, Manifest)> {
        let producer = [("producer", "tradebot tune")];
        Ok(match self {
            Learner::Ppo(p) => {
                let bytes = p.export_policy(Some(1.0))?.to_onnx("obs", "action", &producer)?;
                (bytes, train_ppo::draft(config, p, dates, ppo_last, seconds)?)
            }
            Learner::Sac(l) => {
                let bytes = l.sac.export_policy()?.to_onnx("obs", "action", &producer)?;
                (bytes, train_sac::draft(config, &l.sac, dates, l.last.as_ref(), seconds)?)
            }
        })
    }

    /// The policy exported, checked against ONNX Runtime and registered as a candidate in
    /// `config.state_dir`'s registry, as `tradebot train ppo|sac` registers its model.
    pub(super) fn register(
        &self,
        config: &Config,
        dates: (NaiveDate, NaiveDate),
        ppo_last: Option<&UpdateStats>,
        seconds: f64,
        ran: &Ran,
    ) -> anyhow::Result<Manifest> {
        match self {
            Learner::Ppo(p) => {
                let checked = train_ppo::export_checked(p, config)?;
                train_ppo::register(config, p, dates, ppo_last, seconds, checked, ran)
            }
            Learner::Sac(l) => {
                let checked = train_sac::export_checked(&l.sac, config)?;
                train_sac::register(config, &l.sac, dates, l.last.as_ref(), seconds, checked, ran)
            }
        }
    }
}
