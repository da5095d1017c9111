//! A search's waves: trials started up to `tune.parallel` (those of one shape formed into populations),
//! every trial advanced to its next rung at once, then judged in its number's order by successive
//! halving; stopped trials are replaced until `tune.trials` have run or the time is up. The study is
//! published (stored, and with `--json` reported) after every wave.

use super::TuneJob;
use super::asha::{Asha, Verdict};
use super::population::Group;
use super::ranking::{better, log_end, propose};
use super::trial::{Shared, Trial};
use crate::config::{Config, TuneConfig};
use crate::env::kernel::TensorKernelEnv;
use crate::retrain::study_record::{self as record, StudyRecord, TrialRecord, TrialState};
use crate::store::Store;
use crate::training::emit;
use anyhow::{Context, bail};
use rayon::prelude::*;
use std::time::Instant;

/// A search under way: what it trains on, and its trials alone, in populations, and the best so far.
pub(super) struct Search<'a> {
    job: &'a TuneJob,
    config: &'a Config,
    tune: &'a TuneConfig,
    shared: &'a Shared,
    /// Where the study is stored (`None`: the retrain's child, which reports it as JSON lines instead).
    store: Option<Store>,
    study: StudyRecord,
    rungs: Vec<u64>,
    asha: Asha,
    running: Vec<Trial>,
    groups: Vec<Group>,
    best: Option<Trial>,
    next: usize,
    out_of_time: bool,
}

impl<'a> Search<'a> {
    pub(super) fn new(
        job: &'a TuneJob,
        config: &'a Config,
        tune: &'a TuneConfig,
        shared: &'a Shared,
        store: Option<Store>,
        study: StudyRecord,
    ) -> Search<'a> {
        let rungs = study.rungs.clone();
        let asha = Asha::new(rungs.clone(), tune.reduction);
        Search {
            job,
            config,
            tune,
            shared,
            store,
            study,
            rungs,
            asha,
            running: Vec::new(),
            groups: Vec::new(),
            best: None,
            next: 0,
            out_of_time: false,
        }
    }

    /// The study stored where there is a store; with `--json`, the whole record (the retrain stores it),
    /// then a line for people and progress displays.
    fn publish(&self) -> anyhow::Result<()> {
        let s = &self.study;
        if let Some(store) = &self.store {
            record::save(store, s).context("storing the study")?;
        }
        if self.job.json {
            emit(&serde_json::json!({ "event": "study", "study": s }));
            let ended = s.trials.iter().filter(|t| t.state != TrialState::Running).count();
            let best = s.best_trial().and_then(TrialRecord::value);
            emit(&serde_json::json!({
                "event": "search", "study": s.name, "trials_ended": ended, "trials": s.trials_planned,
                "best_value": best, "best_trial": s.best,
            }));
        }
        Ok(())
    }

    /// Waves until no trial is left to train.
    pub(super) fn waves(&mut self, pool: &rayon::ThreadPool, pooled: bool) -> anyhow::Result<()> {
        loop {
            let joining = self.start_trials(pooled);
            if !joining.is_empty() {
                self.form_groups(joining);
            }
            self.publish()?;
            if self.running.is_empty() && self.groups.is_empty() {
                return Ok(());
            }
            self.advance(pool);
            self.judge()?;
            self.study.best = self.study.best_trial().map(|b| b.number);
        }
    }

    /// New trials up to `tune.parallel` in training; those with an env kernel to stack come back to join
    /// populations, the others train alone. A trial whose parameters are refused is recorded as failed.
    fn start_trials(&mut self, pooled: bool) -> Vec<(Trial, TensorKernelEnv)> {
        let mut joining = Vec::new();
        let tune = self.tune;
        while self.running.len() + self.groups.iter().map(|g| g.members.len()).sum::<usize>() + joining.len()
            < tune.parallel
            && self.next < tune.trials
            && !self.out_of_time
        {
            let next = self.next;
            let params = propose(tune, &self.study, next);
            match Trial::new(self.config, self.shared, &self.rungs, tune.seed, next, params, pooled) {
                Ok((t, kernel)) => {
                    self.study.trials.push(t.rec.clone());
                    match kernel {
                        Some(env) => joining.push((t, env)),
                        None => self.running.push(t),
                    }
                }
                Err(rec) => {
                    let why = rec.error.as_deref().unwrap_or("");
                    log::warn!("study {}: trial {next} refused: {why}", self.study.name);
                    self.study.trials.push(*rec);
                }
            }
            self.next += 1;
        }
        joining
    }

    /// The joining trials formed into populations by shape; one that cannot join fails.
    fn form_groups(&mut self, joining: Vec<(Trial, TensorKernelEnv)>) {
        let (formed, refused) = Group::form(joining);
        for g in &formed {
            let who = match g.members.len() {
                1 => format!("trial {} trains as a population of one", g.numbers()),
                _ => format!("trials {} train as one population", g.numbers()),
            };
            log::info!(
                "study {}: {who} ({} envs each, one env launch, one batched network)",
                self.study.name,
                g.members[0].config.env.n_envs
            );
        }
        for (mut t, why) in refused {
            let e = format!("it could not join a population: {why}");
            log::warn!("study {}: trial {} failed: {e}", self.study.name, t.rec.number);
            t.rec.state = TrialState::Failed;
            t.rec.error = Some(e);
            t.rec.ended_at = Some(crate::clock::now());
            self.store_trial(&t.rec);
        }
        self.groups.extend(formed);
    }

    /// Every trial in training to its next rung: those alone on the pool's threads, each population at once.
    fn advance(&mut self, pool: &rayon::ThreadPool) {
        // The trials' backtests run engines whose lines would repeat per rung (a simulated stop-out reconciled, ...): kept to errors.
        let level = log::max_level();
        log::set_max_level(level.min(log::LevelFilter::Error));
        let shared = self.shared;
        pool.install(|| self.running.par_iter_mut().for_each(|t| t.advance(shared)));
        for g in &mut self.groups {
            g.advance(shared, pool);
        }
        log::set_max_level(level);
        self.out_of_time = shared.deadline.is_some_and(|d| Instant::now() >= d);
    }

    /// Every trial judged in its number's order, whether it trains alone or in a population: it goes on,
    /// or it ends (pruned, complete, stopped, failed) and may be the best so far. A population keeps the
    /// members that go on.
    fn judge(&mut self) -> anyhow::Result<()> {
        let mut all: Vec<(Option<usize>, Trial)> = self.running.drain(..).map(|t| (None, t)).collect();
        for (g, group) in self.groups.iter_mut().enumerate() {
            all.extend(group.members.drain(..).map(|t| (Some(g), t)));
        }
        all.sort_by_key(|(_, t)| t.rec.number);
        let mut kept: Vec<Vec<(usize, Trial)>> = self.groups.iter().map(|_| Vec::new()).collect();
        let mut slot_of: Vec<usize> = vec![0; self.groups.len()];
        for (g, mut t) in all {
            let slot = g.map(|g| {
                slot_of[g] += 1;
                slot_of[g] - 1
            });
            let state = self.verdict(&mut t);
            match (state, g, slot) {
                (TrialState::Running, Some(g), Some(slot)) => kept[g].push((slot, t)),
                (TrialState::Running, _, _) => self.running.push(t),
                (TrialState::Complete | TrialState::Stopped, _, _)
                    if !t.rec.curve.is_empty() && self.best.as_ref().is_none_or(|b| better(&t.rec, &b.rec)) =>
                {
                    self.best = Some(t);
                }
                _ => {}
            }
        }
        let mut still = Vec::new();
        for (mut group, members) in self.groups.drain(..).zip(kept) {
            let slots: Vec<usize> = members.iter().map(|(s, _)| *s).collect();
            group.members = members.into_iter().map(|(_, t)| t).collect();
            if group.keep(&slots)? {
                still.push(group);
            }
        }
        self.groups = still;
        Ok(())
    }

    /// A trial's state after its rung (successive halving on its value), recorded in the study; its end
    /// logged.
    fn verdict(&mut self, t: &mut Trial) -> TrialState {
        let state = match t.outcome.take() {
            None => TrialState::Stopped,
            Some(Err(e)) => {
                t.rec.error = Some(e.to_string());
                TrialState::Failed
            }
            Some(Ok(value)) => match self.asha.report(t.next_rung, value) {
                Verdict::Continue if self.out_of_time => TrialState::Stopped,
                Verdict::Continue => TrialState::Running,
                Verdict::Prune => TrialState::Pruned,
                Verdict::Complete => TrialState::Complete,
            },
        };
        t.next_rung += 1;
        t.rec.state = state;
        if state != TrialState::Running {
            t.rec.ended_at = Some(crate::clock::now());
            let rung = self.rungs.get(t.next_rung - 1).copied();
            // A SAC trial steps its envs one step at a time (a PPO one a rollout of n_steps).
            let n_steps = if t.ppo().is_some() { t.config.ppo.n_steps } else { 1 };
            log_end(&self.study, &t.rec, rung.map(|r| (r, t.config.env.n_envs, n_steps)));
        }
        self.store_trial(&t.rec);
        state
    }

    /// The study's record of a trial replaced by `rec`.
    fn store_trial(&mut self, rec: &TrialRecord) {
        if let Some(slot) = self.study.trials.iter_mut().find(|r| r.number == rec.number) {
            *slot = rec.clone();
        }
    }

    /// The end: the best trial's model registered as a candidate by `register` (an error when no trial
    /// reached a rung), the study published and, when asked, written as an Optuna journal. The study and
    /// the candidate's id.
    pub(super) fn finish(
        mut self,
        register: impl FnOnce(&Trial) -> anyhow::Result<String>,
    ) -> anyhow::Result<(StudyRecord, String)> {
        self.study.ended_at = Some(crate::clock::now());
        let Some(winner) = self.best.take() else {
            let why = if self.out_of_time {
                "no trial reached the end of its budget or a rung before the time budget ran out (see each trial's state and error)"
            } else {
                "every trial failed or was stopped before its first rung (see each trial's error: `tradebot tune show`)"
            };
            self.study.error = Some(why.into());
            self.publish()?;
            bail!("study {}: {why}", self.study.name);
        };
        self.study.best = Some(winner.rec.number);
        let model_id = register(&winner)?;
        self.study.model_id = Some(model_id.clone());
        self.publish()?;
        if let Some(path) = &self.job.optuna_journal {
            super::journal::write(&self.study, path)?;
            log::info!("study {}: Optuna journal written to {}", self.study.name, path.display());
        }
        Ok((self.study, model_id))
    }
}
