//! A search end to end: the data split into training days and validation days, trials proposed by the
//! sampler and trained `parallel` at a time (on the CPU, spread over a pool of threads), each judged at its
//! rungs by successive halving, every change stored; at the end the best trial's model exported, checked
//! against ONNX Runtime and registered as a candidate, as `tradebot train ppo` registers its model.
//!
//! The search goes in waves: every trial in training advances to its next rung at once, then the trials
//! are judged in their numbers' order and stopped ones replaced by new trials. So a search is the same
//! for the same seed whatever the threads' timing, and a trial's weights do not depend on the trials
//! beside it (its draws, seed and generator are its own). The waves are `waves.rs`.

use super::TuneJob;
#[cfg(test)]
pub(super) use super::ranking::end_line;
pub(super) use super::ranking::propose;
use super::trial::{Shared, Trial};
use super::waves::Search;
use crate::backtest::session::first_traded_bar;
use crate::config::{Config, StrategyMode, TuneConfig};
use crate::retrain::study_record::StudyRecord;
use crate::store::Store;
use crate::training::device::{self, Ran};
use crate::training::{self, ppo as train_ppo};
use anyhow::bail;
use std::sync::Arc;
use std::time::Instant;

/// How a search ended.
pub(super) struct StudyRun {
    pub study: StudyRecord,
    /// The candidate registered from the best trial.
    pub model_id: String,
    /// The device and env the trials ran on.
    pub ran: Ran,
}

/// Runs the search `job` describes; returns the study and the best trial's candidate.
pub(super) fn run(job: TuneJob) -> anyhow::Result<StudyRun> {
    let (config, tune) = settings(&job)?;
    let requested = job.device;
    let device = device::resolve(requested)?;
    let snapshot = crate::training::snapshot_path(job.data.as_deref());
    let mut shared = split(&config, &tune, snapshot.as_deref(), device, job.time_budget)?;
    // The env settles the device once for every trial: `cuda` fails here with the reason, `auto` may fall
    // back to the CPU (one WARN); the trials then hold to it (a trial's env that cannot start fails it).
    let (_, device, ran) = train_ppo::training_env(&config.env, shared.panel.clone(), device, requested)?;
    shared.device = device;
    let store = study_store(&job, &config, snapshot.is_some())?;
    let threads = if device.is_cuda() { 1 } else { job.threads.unwrap_or_else(cores).clamp(1, tune.parallel) };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let pooled = population_mode(&job, &config, device);
    if !device.is_cuda() {
        // One libtorch thread: trials alone train one to a thread of the pool, and a population's reductions
        // split over threads would make a trial's bits depend on how many trials share its population.
        tch::set_num_threads(1);
    }
    let study = new_study(&job, &config, &tune, &shared);
    let place = if device.is_cuda() {
        format!("{} ({} env)", training::device_name(device), ran.env.as_str())
    } else {
        format!("{threads} CPU thread{}", if threads == 1 { "" } else { "s" })
    };
    let place = if pooled { format!("{place}, trials of one shape batched as populations") } else { place };
    log_start(&study, &tune, &place);
    let mut search = Search::new(&job, &config, &tune, &shared, store, study);
    search.waves(&pool, pooled)?;
    let (study, model_id) = search.finish(|winner| register(&config, &shared, winner, &ran))?;
    Ok(StudyRun { study, model_id, ran })
}

/// The configuration a search runs on: `[train]` dates resolved, the retrain's seed in place of
/// `tune.seed`, the job's overrides of `[tune]` applied and checked.
fn settings(job: &TuneJob) -> anyhow::Result<(Config, TuneConfig)> {
    let (mut config, seed) = crate::training::dated_config(&job.config)?;
    if let Some(seed) = seed {
        log::info!("seed {seed} (the retrain's, in place of tune.seed)");
        config.tune.seed = seed;
    }
    let mut tune = config.tune.clone();
    tune.trials = job.trials.unwrap_or(tune.trials);
    tune.parallel = job.parallel.unwrap_or(tune.parallel);
    tune.budget_steps = job.budget_steps.unwrap_or(tune.budget_steps);
    tune.min_steps = tune.min_steps.min(tune.budget_steps);
    tune.validate().map_err(anyhow::Error::msg)?;
    Ok((config, tune))
}

/// Where the study is stored. The daemon's retrain holds the store: its child (the snapshot named in the
/// environment, `from_env`) reports the study as JSON lines instead. A search on a snapshot named by
/// `--data` stores it where it can.
fn study_store(job: &TuneJob, config: &Config, snapshot: bool) -> anyhow::Result<Option<Store>> {
    Ok(match (&job.data, snapshot) {
        (None, true) => None,
        (Some(data), _) => match Store::open(&config.state_dir) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!(
                    "the study will not be stored ({e}); training on {} all the same: keep it with --json or --optuna-journal",
                    data.display()
                );
                None
            }
        },
        // Beside a running daemon (it holds the store) the bars came from its read snapshot; the study
        // cannot be stored: said once, kept with --json or --optuna-journal.
        (None, false) => match Store::open(&config.state_dir) {
            Ok(s) => Some(s),
            Err(e @ crate::store::StoreError::Locked { .. }) => {
                log::warn!(
                    "the study will not be stored ({e}); searching on the running daemon's snapshot of the bars all the same: keep it with --json or --optuna-journal"
                );
                None
            }
            Err(e) => return Err(anyhow::Error::new(e).context("opening the store to record the study")),
        },
    })
}

/// A new study's record: its settings and validation days, no trial yet.
fn new_study(job: &TuneJob, config: &Config, tune: &TuneConfig, shared: &Shared) -> StudyRecord {
    let started = crate::clock::now();
    StudyRecord {
        name: format!("tune-{}", started.format("%Y%m%d-%H%M%S-%3f")),
        trigger: job.trigger.clone(),
        sampler: tune.sampler.as_str().into(),
        seed: tune.seed,
        metric: tune.metric.as_str().into(),
        space: tune.space(),
        rungs: tune.rungs(),
        reduction: tune.reduction,
        parallel: tune.parallel,
        trials_planned: tune.trials,
        validation_from: shared
            .val_bars
            .first()
            .and_then(|b| b.get(first_traded_bar(config, StrategyMode::Ppo)))
            .map(|b| b.t),
        validation_to: shared.val_bars.first().and_then(|b| b.last()).map(|b| b.t),
        started_at: started,
        ended_at: None,
        trials: Vec::new(),
        best: None,
        model_id: None,
        error: None,
    }
}

/// The search's start, once: its trials, where they train, the sampler, the rungs and the validation.
fn log_start(study: &StudyRecord, tune: &TuneConfig, place: &str) {
    log::info!(
        "study {}: {} trials, {} at a time on {place}, {} sampler, rungs at {} steps (each trial trains whole updates: a rung rounds up to its next multiple of n_envs × n_steps), ranked by validation {} over {} to {}",
        study.name,
        tune.trials,
        tune.parallel,
        study.sampler,
        study.rungs.iter().map(|r| crate::domain::count(*r)).collect::<Vec<_>>().join(" / "),
        study.metric,
        study.validation_from.map_or("?".into(), |t| t.date_naive().to_string()),
        study.validation_to.map_or("?".into(), |t| t.date_naive().to_string()),
    );
}

/// Whether trials train as populations (`--population`, by default on CUDA), and can.
fn population_mode(job: &TuneJob, config: &crate::config::Config, device: tch::Device) -> bool {
    if !job.population.unwrap_or(device.is_cuda()) {
        return false;
    }
    if config.ppo.target_kl.is_some() {
        log::warn!(
            "trials train one at a time, not as populations: ppo.target_kl ends a trial's epochs early, which trials trained in step cannot do (unset it to batch them)"
        );
        return false;
    }
    if config.env.accounting != crate::env::Accounting::Standard {
        log::warn!(
            "trials train one at a time, not as populations: the env kernel has standard accounting only (env.accounting)"
        );
        return false;
    }
    true
}

pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The training days (a panel) and the validation days (aligned bars with the warm-up before them).
pub(super) fn split(
    config: &crate::config::Config,
    tune: &crate::config::TuneConfig,
    snapshot: Option<&std::path::Path>,
    device: tch::Device,
    time_budget: Option<std::time::Duration>,
) -> anyhow::Result<Shared> {
    let bars = train_ppo::load_bars(config, snapshot)?;
    let days = bars.first().map_or(0, Vec::len);
    let lead = first_traded_bar(config, StrategyMode::Ppo);
    let v = tune.validation_days;
    if days < v + lead + config.features.warmup() + config.env.episode_len + 2 {
        bail!(
            "{days} common days in the [train] range: too few for tune.validation_days = {v} after {} days of training (env.episode_len + warm-up); lower tune.validation_days or widen the range",
            config.features.warmup() + config.env.episode_len + 2
        );
    }
    let cut = days - v;
    let val_bars: Vec<Vec<_>> = bars.iter().map(|b| b[cut - lead..].to_vec()).collect();
    let train: Vec<Vec<_>> = bars
        .into_iter()
        .map(|mut b| {
            b.truncate(cut);
            b
        })
        .collect();
    let data = train_ppo::panel_of(config, train)?;
    Ok(Shared {
        panel: Arc::new(data.panel),
        dates: (data.first, data.last),
        val_bars,
        metric: tune.metric,
        device,
        deadline: time_budget.map(|d| Instant::now() + d),
    })
}

/// The best trial's model (PPO's or SAC's): exported, checked against ONNX Runtime, registered as a
/// candidate whose manifest names its algorithm.
pub(super) fn register(
    config: &crate::config::Config,
    shared: &Shared,
    t: &Trial,
    ran: &Ran,
) -> anyhow::Result<String> {
    let mut c = t.config.clone();
    c.state_dir = config.state_dir.clone();
    let m = t.register(&c, shared, ran)?;
    log::info!("study's best trial {} trained {}: registered as {}", t.rec.number, m.algorithm, m.id);
    Ok(m.id)
}
