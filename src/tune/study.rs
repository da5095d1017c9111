//! A search end to end: the data split into training days and validation days, trials proposed by the
//! sampler and trained `parallel` at a time (on the CPU, spread over a pool of threads), each judged at its
//! rungs by successive halving, every change stored; at the end the best trial's model exported, checked
//! against ONNX Runtime and registered as a candidate, as `tradebot train ppo` registers its model.
//!
//! The search goes in waves: every trial in training advances to its next rung at once, then the trials
//! are judged in their numbers' order and stopped ones replaced by new trials. So a search is the same
//! for the same seed whatever the threads' timing, and a trial's weights do not depend on the trials
//! beside it (its draws, seed and generator are its own).

use super::asha::{Asha, Verdict};
use super::population::Group;
use super::trial::{Shared, Trial};
use super::{TuneJob, space, tpe};
use crate::backtest::session::first_traded_bar;
use crate::config::{SamplerKind, StrategyMode};
use crate::retrain::study::{self as record, StudyRecord, TrialRecord, TrialState};
use crate::store::Store;
use crate::training::device::{self, DeviceRequest, Ran};
use crate::training::{self, emit, ppo as train_ppo};
use anyhow::{Context, bail};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// How a search ended.
pub struct Outcome {
    pub study: StudyRecord,
    /// The candidate registered from the best trial.
    pub model_id: String,
    /// The device and env the trials ran on.
    pub ran: Ran,
}

/// Runs the search `job` describes; returns the study and the best trial's candidate.
pub fn run(job: TuneJob) -> anyhow::Result<Outcome> {
    let mut config = job.config.clone();
    config.train = config.train_dates().map_err(anyhow::Error::msg)?;
    if let Some(seed) = crate::config::seed_from_env().map_err(anyhow::Error::msg)? {
        log::info!("seed {seed} (the retrain's, in place of tune.seed)");
        config.tune.seed = seed;
    }
    let mut tune = config.tune.clone();
    tune.trials = job.trials.unwrap_or(tune.trials);
    tune.parallel = job.parallel.unwrap_or(tune.parallel);
    tune.budget_steps = job.budget_steps.unwrap_or(tune.budget_steps);
    tune.min_steps = tune.min_steps.min(tune.budget_steps);
    tune.validate().map_err(anyhow::Error::msg)?;
    let requested: DeviceRequest = job.device.parse().map_err(anyhow::Error::msg)?;
    let device = device::resolve(requested)?;
    let snapshot = job
        .data
        .clone()
        .or_else(|| std::env::var_os(crate::retrain::pipeline::SNAPSHOT_ENV).map(std::path::PathBuf::from));
    let mut shared = split(&config, &tune, snapshot.as_deref(), device, job.time_budget)?;
    // The env settles the device once for every trial: `cuda` fails here with the reason, `auto` may fall
    // back to the CPU (one WARN); the trials then hold to it (a trial's env that cannot start fails it).
    let (_, device, ran) = train_ppo::training_env(&config.env, shared.panel.clone(), device, requested)?;
    shared.device = device;
    // The daemon's retrain holds the store: its child (the snapshot named in the environment) reports the
    // study as JSON lines instead. A search on a snapshot named by `--data` stores it where it can.
    let store = match (&job.data, &snapshot) {
        (None, Some(_)) => None,
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
        (None, None) => match Store::open(&config.state_dir) {
            Ok(s) => Some(s),
            Err(e @ crate::store::StoreError::Locked { .. }) => {
                log::warn!(
                    "the study will not be stored ({e}); searching on the running daemon's snapshot of the bars all the same: keep it with --json or --optuna-journal"
                );
                None
            }
            Err(e) => return Err(anyhow::Error::new(e).context("opening the store to record the study")),
        },
    };
    let threads = if device.is_cuda() { 1 } else { job.threads.unwrap_or_else(cores).clamp(1, tune.parallel) };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let pooled = population_mode(&job, &config, device);
    if !device.is_cuda() {
        // One libtorch thread: trials alone train one to a thread of the pool, and a population's reductions
        // split over threads would make a trial's bits depend on how many trials share its population.
        tch::set_num_threads(1);
    }
    let rungs = tune.rungs();
    let started = crate::clock::now();
    let mut study = StudyRecord {
        name: format!("tune-{}", started.format("%Y%m%d-%H%M%S-%3f")),
        trigger: job.trigger.clone(),
        sampler: tune.sampler.as_str().into(),
        seed: tune.seed,
        metric: tune.metric.as_str().into(),
        space: tune.space(),
        rungs: rungs.clone(),
        reduction: tune.reduction,
        parallel: tune.parallel,
        trials_planned: tune.trials,
        validation_from: shared
            .val_bars
            .first()
            .and_then(|b| b.get(first_traded_bar(&config, StrategyMode::Ppo)))
            .map(|b| b.t),
        validation_to: shared.val_bars.first().and_then(|b| b.last()).map(|b| b.t),
        started_at: started,
        ended_at: None,
        trials: Vec::new(),
        best: None,
        model_id: None,
        error: None,
    };
    let place = if device.is_cuda() {
        format!("{} ({} env)", training::device_name(device), ran.env.as_str())
    } else {
        format!("{threads} CPU thread{}", if threads == 1 { "" } else { "s" })
    };
    let place = if pooled { format!("{place}, trials of one shape batched as populations") } else { place };
    log::info!(
        "study {}: {} trials, {} at a time on {place}, {} sampler, rungs at {} steps (each trial trains whole updates: a rung rounds up to its next multiple of n_envs × n_steps), ranked by validation {} over {} to {}",
        study.name,
        tune.trials,
        tune.parallel,
        study.sampler,
        rungs.iter().map(|r| crate::domain::count(*r)).collect::<Vec<_>>().join(" / "),
        study.metric,
        study.validation_from.map_or("?".into(), |t| t.date_naive().to_string()),
        study.validation_to.map_or("?".into(), |t| t.date_naive().to_string()),
    );
    let publish = |s: &StudyRecord| -> anyhow::Result<()> {
        if let Some(store) = &store {
            record::save(store, s).context("storing the study")?;
        }
        if job.json {
            // The whole record (the retrain stores it), then a line for people and progress displays.
            emit(&serde_json::json!({ "event": "study", "study": s }));
            let ended = s.trials.iter().filter(|t| t.state != TrialState::Running).count();
            let best = s.best_trial().and_then(TrialRecord::value);
            emit(&serde_json::json!({
                "event": "search", "study": s.name, "trials_ended": ended, "trials": s.trials_planned,
                "best_value": best, "best_trial": s.best,
            }));
        }
        Ok(())
    };
    let mut asha = Asha::new(rungs.clone(), tune.reduction);
    let mut running: Vec<Trial> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut best: Option<Trial> = None;
    let mut next = 0;
    let mut out_of_time = false;
    loop {
        let mut joining = Vec::new();
        while running.len() + groups.iter().map(|g| g.members.len()).sum::<usize>() + joining.len() < tune.parallel
            && next < tune.trials
            && !out_of_time
        {
            let params = propose(&tune, &study, next);
            match Trial::new(&config, &shared, &rungs, tune.seed, next, params, pooled) {
                Ok((t, kernel)) => {
                    study.trials.push(t.rec.clone());
                    match kernel {
                        Some(env) => joining.push((t, env)),
                        None => running.push(t),
                    }
                }
                Err(rec) => {
                    log::warn!("study {}: trial {next} refused: {}", study.name, rec.error.as_deref().unwrap_or(""));
                    study.trials.push(*rec);
                }
            }
            next += 1;
        }
        if !joining.is_empty() {
            let (formed, refused) = Group::form(joining);
            for g in &formed {
                let who = match g.members.len() {
                    1 => format!("trial {} trains as a population of one", g.numbers()),
                    _ => format!("trials {} train as one population", g.numbers()),
                };
                log::info!(
                    "study {}: {who} ({} envs each, one env launch, one batched network)",
                    study.name,
                    g.members[0].config.env.n_envs
                );
            }
            for (mut t, why) in refused {
                let e = format!("it could not join a population: {why}");
                log::warn!("study {}: trial {} failed: {e}", study.name, t.rec.number);
                t.rec.state = TrialState::Failed;
                t.rec.error = Some(e);
                t.rec.ended_at = Some(crate::clock::now());
                if let Some(slot) = study.trials.iter_mut().find(|r| r.number == t.rec.number) {
                    *slot = t.rec.clone();
                }
            }
            groups.extend(formed);
        }
        publish(&study)?;
        if running.is_empty() && groups.is_empty() {
            break;
        }
        // The trials' backtests run engines whose lines would repeat per rung (a simulated stop-out reconciled, ...): kept to errors.
        let level = log::max_level();
        log::set_max_level(level.min(log::LevelFilter::Error));
        pool.install(|| running.par_iter_mut().for_each(|t| t.advance(&shared)));
        for g in &mut groups {
            g.advance(&shared, &pool);
        }
        log::set_max_level(level);
        out_of_time = shared.deadline.is_some_and(|d| Instant::now() >= d);
        // Every trial judged in its number's order, whether it trains alone or in a population.
        let mut all: Vec<(Option<usize>, Trial)> = running.drain(..).map(|t| (None, t)).collect();
        for (g, group) in groups.iter_mut().enumerate() {
            all.extend(group.members.drain(..).map(|t| (Some(g), t)));
        }
        all.sort_by_key(|(_, t)| t.rec.number);
        let mut kept: Vec<Vec<(usize, Trial)>> = groups.iter().map(|_| Vec::new()).collect();
        let mut slot_of: Vec<usize> = vec![0; groups.len()];
        for (g, mut t) in all {
            let slot = g.map(|g| {
                slot_of[g] += 1;
                slot_of[g] - 1
            });
            let state = match t.outcome.take() {
                None => TrialState::Stopped,
                Some(Err(e)) => {
                    t.rec.error = Some(e);
                    TrialState::Failed
                }
                Some(Ok(value)) => match asha.report(t.next_rung, value) {
                    Verdict::Continue if out_of_time => TrialState::Stopped,
                    Verdict::Continue => TrialState::Running,
                    Verdict::Prune => TrialState::Pruned,
                    Verdict::Complete => TrialState::Complete,
                },
            };
            t.next_rung += 1;
            t.rec.state = state;
            if state != TrialState::Running {
                t.rec.ended_at = Some(crate::clock::now());
                let rung = rungs.get(t.next_rung - 1).copied();
                log_end(&study, &t.rec, rung.map(|r| (r, t.config.env.n_envs, t.config.ppo.n_steps)));
            }
            if let Some(slot) = study.trials.iter_mut().find(|r| r.number == t.rec.number) {
                *slot = t.rec.clone();
            }
            match (state, g, slot) {
                (TrialState::Running, Some(g), Some(slot)) => kept[g].push((slot, t)),
                (TrialState::Running, _, _) => running.push(t),
                (TrialState::Complete | TrialState::Stopped, _, _)
                    if !t.rec.curve.is_empty() && best.as_ref().is_none_or(|b| better(&t.rec, &b.rec)) =>
                {
                    best = Some(t);
                }
                _ => {}
            }
        }
        let mut still = Vec::new();
        for (mut group, members) in groups.drain(..).zip(kept) {
            let slots: Vec<usize> = members.iter().map(|(s, _)| *s).collect();
            group.members = members.into_iter().map(|(_, t)| t).collect();
            if group.keep(&slots)? {
                still.push(group);
            }
        }
        groups = still;
        study.best = study.best_trial().map(|b| b.number);
    }
    study.ended_at = Some(crate::clock::now());
    let Some(winner) = best else {
        let why = if out_of_time {
            "no trial reached the end of its budget or a rung before the time budget ran out (see each trial's state and error)"
        } else {
            "every trial failed or was stopped before its first rung (see each trial's error: `tradebot tune show`)"
        };
        study.error = Some(why.into());
        publish(&study)?;
        bail!("study {}: {why}", study.name);
    };
    study.best = Some(winner.rec.number);
    let model_id = register(&config, &shared, &winner, &ran)?;
    study.model_id = Some(model_id.clone());
    publish(&study)?;
    if let Some(path) = &job.optuna_journal {
        super::journal::write(&study, path)?;
        log::info!("study {}: Optuna journal written to {}", study.name, path.display());
    }
    Ok(Outcome { study, model_id, ran })
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

/// The next trial's parameters: random, or TPE over the trials judged so far, best first.
pub(super) fn propose(tune: &crate::config::TuneConfig, study: &StudyRecord, number: usize) -> space::Params {
    let space = tune.space();
    match tune.sampler {
        SamplerKind::Random => space::random(&space, tune.seed, number),
        SamplerKind::Tpe => {
            let mut judged: Vec<&TrialRecord> = study.trials.iter().filter(|t| !t.curve.is_empty()).collect();
            judged.sort_by(|a, b| if better(a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
            let ranked: Vec<&space::Params> = judged.iter().map(|t| &t.params).collect();
            tpe::propose(&space, &ranked, tune.seed, number, tune.startup_trials)
        }
    }
}

/// Whether `a` ranks above `b`: further along, then a higher value, then the lower number.
pub(super) fn better(a: &TrialRecord, b: &TrialRecord) -> bool {
    let (ka, kb) = (a.rank_key(), b.rank_key());
    ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(b.number.cmp(&a.number)).is_gt()
}

/// A trial's end, with the steps it trained; `rung` (its last rung in steps, the trial's envs and
/// `ppo.n_steps`) says why they exceed the rung when they do (whole updates).
fn log_end(study: &StudyRecord, t: &TrialRecord, rung: Option<(u64, usize, usize)>) {
    match &t.error {
        Some(e) => log::warn!("study {}: trial {} failed: {e}", study.name, t.number),
        None => log::info!("study {}: {}", study.name, end_line(study, t, rung)),
    }
}

/// "trial 0 complete at 65,536 steps (the rung of 49,152 steps rounds up to …): sharpe 0.812".
pub(super) fn end_line(study: &StudyRecord, t: &TrialRecord, rung: Option<(u64, usize, usize)>) -> String {
    let value = t.value().map_or("no value".into(), |v| format!("{} {v:.3}", study.metric));
    let steps = t.curve.last().map_or(0, |r| r.steps);
    let why = rung
        .filter(|(r, _, _)| steps > *r)
        .map(|(r, envs, n)| {
            let (updates, _, _) = training::whole_updates(r, envs, n);
            format!(
                " (the {}-step rung rounds up to {updates} whole update{} of {}: {envs} envs × {n} steps)",
                crate::domain::count(r),
                if updates == 1 { "" } else { "s" },
                crate::domain::count((envs * n) as u64)
            )
        })
        .unwrap_or_default();
    format!("trial {} {} at {} steps{why}: {value}", t.number, t.state.as_str(), crate::domain::count(steps))
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

/// The best trial's model: exported, checked against ONNX Runtime, registered as a candidate.
pub(super) fn register(
    config: &crate::config::Config,
    shared: &Shared,
    t: &Trial,
    ran: &Ran,
) -> anyhow::Result<String> {
    let checked = train_ppo::export_checked(&t.ppo, &t.config)?;
    let mut c = t.config.clone();
    c.state_dir = config.state_dir.clone();
    let m = train_ppo::register(&c, &t.ppo, shared.dates, t.last.as_ref(), t.seconds, checked, ran)?;
    Ok(m.id)
}
