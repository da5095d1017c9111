//! One tradebot worker on a study in Optuna's storage. It trains one trial at a time (the cluster's
//! parallelism is its workers); the storage numbers the trials. Each trial's parameters are proposed from
//! every trial of the study (other workers' included, Python's too), each rung's value is judged by
//! successive halving against every value the study holds at that rung, and a heartbeat in the trial's
//! system attributes says the trial is alive. Before each trial, and while the study's last trials run, the
//! worker fails other tradebot workers' running trials whose heartbeat is older than the grace; a trial
//! without our heartbeat (a Python worker's) is never failed here.

use super::super::asha::{Asha, Verdict};
use super::super::study::{self, StudyRun};
use super::super::trial::{Shared, Trial};
use super::super::{Cluster, TuneJob, space};
use super::client::waited_here;
use super::holdout;
use super::messages::{self as m, state};
use super::share::StorageShare;
use super::view::{MODEL_ATTR_PREFIX, SETTINGS_ATTR, record_of};
use super::{Client, FORMAT, FORMAT_ATTR, HEARTBEAT_ATTR, SPACE_ATTR, StorageError, WORKER_ATTR, mapping, unix_now};
use crate::config::{Config, TuneConfig};
use crate::training::device::{self, Ran};
use crate::training::ppo as train_ppo;
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs this worker's share of the study; returns the study as the storage holds it at the end and the
/// candidate registered from this worker's best trial.
pub(crate) fn run(job: TuneJob, cluster: &Cluster) -> anyhow::Result<StudyRun> {
    let mut config = job.config.clone();
    config.train = config.train_dates().map_err(anyhow::Error::msg)?;
    let mut tune = config.tune.clone();
    tune.trials = job.trials.unwrap_or(tune.trials);
    tune.budget_steps = job.budget_steps.unwrap_or(tune.budget_steps);
    tune.min_steps = tune.min_steps.min(tune.budget_steps);
    tune.validate().map_err(anyhow::Error::msg)?;
    let client = Arc::new(Client::new(&cluster.url)?);
    let study_id = join(&client, &cluster.study, &tune)?;
    let requested = job.device;
    let device = device::resolve(requested)?;
    let mut shared = study::split(&config, &tune, job.data.as_deref(), device, job.time_budget)?;
    let (_, device, ran) = train_ppo::training_env(&config.env, shared.panel.clone(), device, requested)?;
    shared.device = device;
    if !device.is_cuda() {
        tch::set_num_threads(job.threads.unwrap_or(1).max(1) as i32);
    }
    let me = worker_id();
    log::info!(
        "study {} on {}: worker {me} joins, trials one at a time until the study has {}, heartbeat grace {}s",
        cluster.study,
        cluster.url,
        tune.trials,
        cluster.grace.as_secs()
    );
    let rungs = tune.rungs();
    let holdout = match holdout::no_holdout(&config) {
        Some(why) => {
            log::info!("{why}");
            None
        }
        None => Some(holdout::HoldoutGate::open(&config).context("the promotion gate on the holdout")?),
    };
    let search = Search {
        client: &client,
        config: &config,
        shared: &shared,
        tune: &tune,
        rungs: &rungs,
        gate: holdout.as_ref(),
        ran: &ran,
    };
    // This worker's threads: the native trainer's and the env's parallel loops run on this pool, not on
    // rayon's global one (every core), so that workers beside each other on one machine do not each spread
    // a trial over every core.
    let threads = job.threads.unwrap_or(1).max(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let best = pool.install(|| trials(&search, study_id, cluster, &me))?;
    ended(&client, study_id, cluster, &tune, &job, best, ran)
}

/// The study as the storage holds it once this worker is done, with this worker's candidate (named in the
/// study's system attributes) or why it has none.
fn ended(
    client: &Client,
    study_id: i64,
    cluster: &Cluster,
    tune: &TuneConfig,
    job: &TuneJob,
    best: Option<(f64, usize, String)>,
    ran: Ran,
) -> anyhow::Result<StudyRun> {
    let all = client.trials(study_id)?;
    let mut record = record_of(&cluster.study, tune, &all);
    record.ended_at = Some(crate::clock::now());
    if let Some(path) = &job.optuna_journal {
        super::super::journal::write(&record, path)?;
    }
    let Some((_, winner, model_id)) = best else {
        let Some(b) = record.best else {
            bail!(
                "study {}: no trial completed (see each trial's state and error: `tradebot tune show {} --storage {}`)",
                cluster.study,
                cluster.study,
                cluster.url
            );
        };
        // Every trial of this worker was pruned or failed: the study's best is another worker's.
        if record.error.is_none() {
            record.error = Some(format!("the study's best, trial {b}, is another worker's"));
        }
        log::info!(
            "study {}: no trial of this worker completed, so it registers no candidate; the study's best is trial {b}",
            cluster.study
        );
        return Ok(StudyRun { study: record, model_id: String::new(), ran });
    };
    // The study names each worker's candidate too (`tune show --storage` reads the best trial's).
    let key = format!("{MODEL_ATTR_PREFIX}{winner}");
    client.set_study_system_attr(study_id, &key, &json!(model_id))?;
    log::info!("study {}: this worker's best trial {} registered as candidate {model_id}", cluster.study, winner);
    // The record's candidate is the study's best trial's: where another worker's trial is the best, say whose.
    match record.best {
        Some(b) if b == winner => record.model_id = Some(model_id.clone()),
        Some(b) if record.error.is_none() => {
            record.error = Some(format!(
                "the study's best, trial {b}, is another tradebot worker's (its candidate is where that worker runs); this worker's best, trial {}, is candidate {model_id}",
                winner
            ))
        }
        _ => {}
    }
    Ok(StudyRun { study: record, model_id, ran })
}

/// Trains this worker's trials until the study holds `tune.trials` and none of them runs; its best (value,
/// number and the candidate registered from it).
fn trials(s: &Search, study_id: i64, cluster: &Cluster, me: &str) -> anyhow::Result<Option<(f64, usize, String)>> {
    let client: &Client = s.client;
    let mut best: Option<(f64, usize, String)> = None;
    let mut share = StorageShare::default();
    loop {
        let (started, waited) = (Instant::now(), waited_here());
        let all = client.trials(study_id)?;
        fail_stale(client, &all, me, cluster.grace)?;
        if all.len() >= s.tune.trials {
            // Others' last trials: wait for them, failing those whose worker died; looked at each second, so
            // that this worker ends soon after the study's last trial (not up to a heartbeat's period later).
            if !all.iter().any(|t| t.state == state::RUNNING && t.system_attributes.contains_key(HEARTBEAT_ATTR)) {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
            continue;
        }
        let created =
            client.create_trial(study_id, &[(HEARTBEAT_ATTR, json!(unix_now())), (WORKER_ATTR, json!(me))])?;
        let number = created.number.max(0) as usize;
        let record = record_of(&cluster.study, s.tune, &all);
        let params = study::propose(s.tune, &record, number);
        let beating = Heartbeat::start(s.client.clone(), created.trial_id, beat(cluster.grace));
        let done = run_trial(s, (study_id, &created), params, best.as_ref().map(|(v, _, _)| *v));
        beating.stop();
        share.add(created.number, started, waited);
        let done = match done {
            Err(e) if ended_elsewhere(&e) => {
                log::warn!(
                    "trial {} was ended by another worker (its heartbeat was late?): {e:#}; its result is not counted",
                    created.number
                );
                None
            }
            other => other?,
        };
        if let Some((value, Some(model))) = done {
            best = Some((value, number, model));
        }
    }
    share.log(&cluster.study);
    Ok(best)
}

/// The study's id, created (maximising, with our space) or joined (its space checked against ours).
fn join(client: &Client, name: &str, tune: &TuneConfig) -> anyhow::Result<i64> {
    let space = tune.space();
    let id = match client.study_id(name)? {
        Some(id) => id,
        None => match client.create_study(name)? {
            Some(id) => {
                client.set_study_system_attr(id, FORMAT_ATTR, &json!(FORMAT))?;
                client.set_study_system_attr(
                    id,
                    SPACE_ATTR,
                    &Value::String(mapping::space_attr(&space).to_string()),
                )?;
                client.set_study_system_attr(id, SETTINGS_ATTR, &settings(tune))?;
                log::info!("study {name} created in the Optuna storage {}", client.url);
                return Ok(id);
            }
            None => client.study_id(name)?.context("the study was created by another worker and is gone again")?,
        },
    };
    let conflict = |why: String| StorageError::Conflict { study: name.into(), why };
    let directions = client.directions(id)?;
    if directions != [m::MAXIMIZE] {
        return Err(conflict(format!(
            "it has {} objective(s) with directions {directions:?} (0 = minimise); tradebot maximises one validation metric: use another --study",
            directions.len()
        ))
        .into());
    }
    let attrs = client.study_system_attrs(id)?;
    let text = |k: &str| attrs.get(k).and_then(|s| serde_json::from_str::<Value>(s).ok());
    if let Some(f) = text(FORMAT_ATTR)
        && f != json!(FORMAT)
    {
        return Err(conflict(format!(
            "it was written by a tradebot with format {f} (this one writes {FORMAT}): run the same tradebot version on every worker"
        ))
        .into());
    }
    let stored = text(SPACE_ATTR).and_then(|v| v.as_str().map(String::from));
    let trials = client.trials(id)?;
    let why = mapping::space_conflicts(&space, stored.as_deref(), &trials);
    if !why.is_empty() {
        return Err(conflict(format!(
            "its search space differs from [tune.space]: {}; use the study's ranges or another --study",
            why.join("; ")
        ))
        .into());
    }
    if stored.is_none() {
        client.set_study_system_attr(id, SPACE_ATTR, &Value::String(mapping::space_attr(&space).to_string()))?;
        client.set_study_system_attr(id, FORMAT_ATTR, &json!(FORMAT))?;
    }
    // A study another client created (a Python worker first): `tune show` reads the metric and rungs from here.
    if !attrs.contains_key(SETTINGS_ATTR) {
        client.set_study_system_attr(id, SETTINGS_ATTR, &settings(tune))?;
    }
    log::info!("study {name} joined in the Optuna storage {} ({} trials so far)", client.url, trials.len());
    Ok(id)
}

fn settings(tune: &TuneConfig) -> Value {
    json!({
        "metric": tune.metric.as_str(), "rungs": tune.rungs(), "reduction": tune.reduction, "seed": tune.seed,
        "trials": tune.trials,
        "sampler": tune.sampler.as_str(),
    })
}

/// What every trial of this worker shares.
struct Search<'a> {
    client: &'a Arc<Client>,
    config: &'a Config,
    shared: &'a Shared,
    tune: &'a TuneConfig,
    rungs: &'a [u64],
    /// The promotion gate on the holdout, where `[train]` has one.
    gate: Option<&'a holdout::HoldoutGate>,
    ran: &'a Ran,
}

/// Trains one trial to its end; its value and weights where it completed.
fn run_trial(
    s: &Search,
    (study_id, created): (i64, &m::Trial),
    params: space::Params,
    best: Option<f64>,
) -> anyhow::Result<Option<(f64, Option<String>)>> {
    let (client, config, shared, tune, rungs) = (s.client, s.config, s.shared, s.tune, s.rungs);
    let (id, number) = (created.trial_id, created.number.max(0) as usize);
    let space = tune.space();
    for (name, x) in &params {
        let Some(d) = space.get(name) else { continue };
        client.set_param(id, name, mapping::internal(d, *x), &mapping::distribution_json(d))?;
    }
    let seed = space::trial_seed(tune.seed, number);
    client.set_user_attr(id, "seed", &json!(seed))?;
    let mut t = match Trial::new(config, shared, rungs, tune.seed, number, params, false) {
        Ok((t, _)) => t,
        Err(rec) => {
            let e = rec.error.unwrap_or_default();
            log::warn!("trial {number} refused: {e}");
            client.set_user_attr(id, "error", &json!(e))?;
            client.finish(id, state::FAIL, None)?;
            return Ok(None);
        }
    };
    for (rung, &step) in rungs.iter().enumerate() {
        t.advance(shared);
        let value = match t.outcome.take() {
            None => {
                log::info!("trial {number} stopped by the time budget: pruned in the study");
                client.finish(id, state::PRUNED, None)?;
                return Ok(None);
            }
            Some(Err(e)) => {
                log::warn!("trial {number} failed: {e}");
                client.set_user_attr(id, "error", &json!(e.to_string()))?;
                client.finish(id, state::FAIL, None)?;
                return Ok(None);
            }
            Some(Ok(v)) => v,
        };
        t.next_rung += 1;
        client.set_intermediate(id, step as i64, value)?;
        let mut asha = Asha::new(rungs.to_vec(), tune.reduction);
        for other in client.trials(study_id)?.iter().filter(|o| o.trial_id != id) {
            if let Some(v) = other.intermediate_values.get(&(step as i64)) {
                asha.report(rung, *v);
            }
        }
        let verdict = asha.report(rung, value);
        for (k, v) in t.rec.metrics.iter().filter(|(_, v)| v.is_finite()) {
            client.set_user_attr(id, k, &json!(v))?;
        }
        match verdict {
            Verdict::Continue => continue,
            Verdict::Prune => {
                log::info!("trial {number} pruned at {step} steps: {} {value:.3}", tune.metric.as_str());
                client.finish(id, state::PRUNED, None)?;
                return Ok(None);
            }
            Verdict::Complete => return complete(s, (id, number), &t, value, best),
        }
    }
    client.finish(id, state::COMPLETE, t.rec.value())?;
    Ok(None)
}

/// Completes trial `number` with `value`: the gate's decision on its model first, and where it beats this
/// worker's `best`, its model registered now, so that the trial names its candidate (a finished trial takes
/// no attributes; the last one registered is the worker's best). Its value and candidate, where counted.
fn complete(
    s: &Search,
    (id, number): (i64, usize),
    t: &Trial,
    value: f64,
    best: Option<f64>,
) -> anyhow::Result<Option<(f64, Option<String>)>> {
    let client: &Client = s.client;
    if let Some(g) = s.gate {
        judge(client, g, (id, number), t, s)?;
    }
    let model = if best.is_none_or(|b| value > b) {
        let m = study::register(s.config, s.shared, t, s.ran)?;
        client.set_user_attr(id, "model_id", &json!(m))?;
        Some(m)
    } else {
        None
    };
    log::info!("trial {number} complete: {} {value:.3}", s.tune.metric.as_str());
    if !client.finish(id, state::COMPLETE, Some(value))? {
        log::warn!(
            "trial {number} had been ended by another worker (its heartbeat was late?): its value is not counted"
        );
        return Ok(None);
    }
    Ok(Some((value, model)))
}

/// The gate's decision on trial `number`'s model, in its user attributes (before it completes: a finished
/// trial takes none). A model the gate cannot judge says why there; the trial completes all the same.
fn judge(
    client: &Client,
    g: &holdout::HoldoutGate,
    (id, number): (i64, usize),
    t: &Trial,
    s: &Search,
) -> anyhow::Result<()> {
    match g.judge(t, s.shared, s.ran) {
        Ok((figures, decision)) => {
            log::info!(
                "trial {number} on the holdout: Sharpe {:.3}, return {:.2}%, {} trades; the gate would {}: {}",
                figures.sharpe,
                100.0 * figures.total_return,
                figures.trades,
                if decision.promote { "promote it" } else { "keep the champion" },
                decision.reason
            );
            for (k, v) in g.attrs(&figures, &decision) {
                client.set_user_attr(id, k, &v)?;
            }
        }
        Err(e) => {
            log::warn!("trial {number}: the gate could not judge its model on the holdout: {e:#}");
            client.set_user_attr(id, "gate", &json!({ "error": format!("{e:#}") }))?;
        }
    }
    Ok(())
}

/// The storage refused an update because the trial had ended (another worker failed it).
fn ended_elsewhere(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<StorageError>(),
        Some(StorageError::Refused { code: tonic::Code::FailedPrecondition, .. })
    )
}

/// Fails other tradebot workers' running trials whose heartbeat is older than `grace`.
fn fail_stale(client: &Client, all: &[m::Trial], me: &str, grace: Duration) -> anyhow::Result<()> {
    let now = unix_now();
    for t in all.iter().filter(|t| t.state == state::RUNNING) {
        let Some(beat) = t.system_attributes.get(HEARTBEAT_ATTR).and_then(|s| s.parse::<f64>().ok()) else {
            continue;
        };
        let worker = t.system_attributes.get(WORKER_ATTR).and_then(|s| serde_json::from_str::<String>(s).ok());
        // A storage outage stops every heartbeat: a trial's lateness counts from the storage's return.
        let since = beat.max(client.back_at().unwrap_or(0.0));
        if worker.as_deref() == Some(me) || now - since <= grace.as_secs_f64() {
            continue;
        }
        let who = worker.unwrap_or_else(|| "?".into());
        let why = format!("its worker {who} stopped: no heartbeat for {:.0}s (grace {}s)", now - beat, grace.as_secs());
        // Set before the state: a finished trial takes no attributes.
        match client.set_user_attr(t.trial_id, "error", &json!(why)) {
            Ok(()) | Err(StorageError::Refused { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        if client.finish(t.trial_id, state::FAIL, None)? {
            log::warn!("trial {} failed: {why}", t.number);
        }
    }
    Ok(())
}

/// How often a running trial's heartbeat is written: six times per grace, at least once a second.
fn beat(grace: Duration) -> Duration {
    (grace / 6).max(Duration::from_secs(1))
}

/// `host-pid`: which worker runs a trial.
fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "host".into());
    format!("{}-{}", host.trim(), std::process::id())
}

/// A thread writing a trial's heartbeat until stopped.
struct Heartbeat {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Heartbeat {
    fn start(client: Arc<Client>, trial_id: i64, every: Duration) -> Heartbeat {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                if let Err(e) = client.set_system_attr(trial_id, HEARTBEAT_ATTR, &json!(unix_now())) {
                    log::debug!("trial heartbeat not written: {e}");
                }
            }
        });
        Heartbeat { stop, thread }
    }

    fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}
