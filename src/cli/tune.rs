//! `tradebot tune ppo|list|show`: a hyper-parameter search (`crate::tune`), and the stored studies.

use super::load_config;
use crate::out::{err, errln, out, outln};
use crate::retrain::study_record;
use crate::training::device::DeviceRequest;
use crate::tune::{self, TuneJob};
use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum TuneCmd {
    /// Search PPO's hyper-parameters ([tune]); the best trial's model is registered as a candidate.
    Ppo(TuneArgs),
    /// The stored studies, most recent first.
    List {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The studies as a JSON array instead of the table.
        #[arg(long)]
        json: bool,
        /// The studies in Optuna's storage at grpc://host:port (its gRPC proxy) instead of the store.
        #[arg(long)]
        storage: Option<String>,
    },
    /// One study's trials (`latest` for the most recent).
    Show {
        /// The study's id, as `tune list` shows it, or `latest` for the most recent.
        #[arg(default_value = "latest")]
        study: String,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The study and its trials as one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the study as an Optuna journal file (for `optuna-dashboard FILE`).
        #[arg(long)]
        optuna_journal: Option<PathBuf>,
        /// The study in Optuna's storage at grpc://host:port (its gRPC proxy) instead of the store.
        #[arg(long)]
        storage: Option<String>,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Trials in all (default: tune.trials).
    #[arg(long)]
    pub trials: Option<usize>,
    /// Trials training at once (default: tune.parallel).
    #[arg(long)]
    pub parallel: Option<usize>,
    /// Environment steps of a trial run to the end (default: tune.budget_steps).
    #[arg(long)]
    pub budget_steps: Option<u64>,
    /// Stop after this long: 90s, 45m, 2h. Trials still training then end as stopped.
    #[arg(long, value_parser = parse_duration)]
    pub time_budget: Option<Duration>,
    /// CPU threads (default: every core, at most --parallel; a worker on --storage: 1, its trials being one at a time).
    #[arg(long)]
    pub threads: Option<usize>,
    /// auto | cpu | cuda
    #[arg(long, default_value = "cpu", value_parser = DeviceRequest::parse_arg)]
    pub device: DeviceRequest,
    /// Train the trials of one shape as one population (stacked weights, one env kernel launch, batched
    /// matmuls): on | off. Default: on with CUDA, off on the CPU (where trials spread over the cores).
    #[arg(long, value_parser = parse_on_off)]
    pub population: Option<bool>,
    /// Train on a dataset snapshot (safetensors, written by the daemon's retrain) instead of the store.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Write the study as an Optuna journal file (for `optuna-dashboard FILE`).
    #[arg(long)]
    pub optuna_journal: Option<PathBuf>,
    /// JSON lines on stdout: the study after each wave, then done (or error).
    #[arg(long)]
    pub json: bool,
    /// Join a study in Optuna's storage through its gRPC proxy (grpc://host:port) as one worker among
    /// others, tradebot's or Python Optuna's (with --study).
    #[arg(long, requires = "study")]
    pub storage: Option<String>,
    /// The study's name in --storage: created if it does not exist, joined if it does.
    #[arg(long, requires = "storage")]
    pub study: Option<String>,
    /// With --storage: another tradebot worker's running trial whose heartbeat is older than this is failed.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub heartbeat_grace: Duration,
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{s:?}: on or off")),
    }
}

/// `90s`, `45m`, `2h`, or seconds.
pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let n: f64 = num.trim().parse().map_err(|_| format!("{s:?}: a number and a unit: 90s, 45m, 2h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: the unit must be s, m or h")),
    };
    if !(secs > 0.0 && secs < 1e8) {
        return Err(format!("{s:?}: must be above 0"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub(super) fn run(cmd: TuneCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        TuneCmd::Ppo(a) => ppo(a),
        TuneCmd::List { storage: Some(url), json, config } => {
            let config = load_config(config)?;
            let all = tune::optuna_storage::view::list(&url, &config.tune)?;
            if json {
                outln!("{}", serde_json::to_string(&all)?)?;
            } else if all.is_empty() {
                outln!("no studies in {url}: run `tradebot tune ppo --storage {url} --study NAME`")?;
            } else {
                for s in &all {
                    outln!("{}", list_line(s))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TuneCmd::Show { study: name, config, json, optuna_journal, storage: Some(url) } => {
            let config = load_config(config)?;
            let s = tune::optuna_storage::view::show(&url, &name, &config.tune)?;
            show(&s, json, optuna_journal)
        }
        TuneCmd::List { config, json, storage: None } => {
            let config = load_config(config)?;
            let store = super::read_store(&config)?;
            let all = study_record::list(&store)?;
            if json {
                outln!("{}", serde_json::to_string(&all)?)?;
            } else if all.is_empty() {
                outln!("no studies yet: run `tradebot tune ppo`")?;
            } else {
                for s in &all {
                    outln!("{}", list_line(s))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TuneCmd::Show { study: name, config, json, optuna_journal, storage: None } => {
            let config = load_config(config)?;
            let store = super::read_store(&config)?;
            let Some(s) = study_record::find(&store, &name)? else {
                bail!("no study {name:?} in {}: `tradebot tune list` shows them", config.state_dir.display());
            };
            show(&s, json, optuna_journal)
        }
    }
}

fn show(s: &study_record::StudyRecord, json: bool, optuna_journal: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    if let Some(path) = optuna_journal {
        tune::journal::write(s, &path)?;
        errln!("Optuna journal written to {}", path.display());
    }
    if json {
        outln!("{}", serde_json::to_string(s)?)?;
    } else {
        out!("{}", tune::table(s))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A study in `tune list`: its name, trials, best value, candidate and trigger.
fn list_line(s: &study_record::StudyRecord) -> String {
    let best = s
        .best
        .and_then(|n| s.trials.iter().find(|t| t.number == n))
        .or_else(|| s.best_trial())
        .and_then(|b| b.value().map(|v| format!("best {} {v:.3} (trial {})", s.metric, b.number)));
    format!(
        "{}  {} trials  {}  {}  {}",
        s.name,
        s.trials.len(),
        best.unwrap_or_else(|| "no value yet".into()),
        s.model_id.as_deref().unwrap_or("-"),
        s.trigger
    )
}

fn ppo(a: TuneArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(a.config).map_err(|e| {
        let e = anyhow::Error::from(e);
        if a.json {
            crate::training::emit_error(&e);
        }
        e
    })?;
    let trigger =
        if std::env::var_os(crate::retrain::child::PARENT_PID_ENV).is_some() { "retrain" } else { "command line" };
    let job = TuneJob {
        config,
        device: a.device,
        trials: a.trials,
        parallel: a.parallel,
        budget_steps: a.budget_steps,
        time_budget: a.time_budget,
        threads: a.threads,
        population: a.population,
        data: a.data,
        json: a.json,
        optuna_journal: a.optuna_journal,
        cluster: match (a.storage, a.study) {
            (Some(url), Some(study)) => Some(tune::Cluster { url, study, grace: a.heartbeat_grace }),
            _ => None,
        },
        trigger: trigger.into(),
    };
    let (s, model_id) = tune::tune_ppo(job)?;
    if !a.json {
        err!("{}", tune::table(&s));
        // A worker on a shared study whose trials were all pruned registers nothing.
        if !model_id.is_empty() {
            outln!("{model_id}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
