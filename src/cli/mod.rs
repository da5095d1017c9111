//! Command-line interface: argument types (clap) and dispatch, nothing else. The daemon is
//! `crate::daemon` (`tradebot::run`), training is `crate::training`; each command here turns its
//! arguments into a call to the library and prints the answer. `main` only prints the error chain.

mod backtest;
mod control;
mod data;
mod doctor;
mod doctor_gpu;
mod fake;
mod fetch;
mod models;
mod report;
mod retrain;
mod risk;
mod status;
mod store;
mod subcommands;
mod train;
mod tune;

pub use subcommands::{BenchCmd, ConfigCmd, DataCmd, ModelsCmd, RiskCmd, StoreCmd, TrainCmd};

use crate::config::{Config, ConfigError};
use crate::out::{errln, out, outln};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// `EX_DATAERR`: input data was incorrect (bad rows in an import).
pub const EX_DATAERR: u8 = 65;

#[derive(Debug, Parser)]
#[command(
    name = "tradebot",
    version,
    about = "Trade with your own ML models: Alpaca data, ONNX inference, local GPU retraining"
)]
/// The command line: one subcommand (run the daemon, inspect or change its state, train, bench, ...).
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `tradebot`; each variant's doc is its `--help` line.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon (paper by default; live needs mode = "live" in the config AND --live).
    Run {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Confirms live trading with real money. Refused unless the config says mode = "live".
        #[arg(long)]
        live: bool,
        /// After a replay ends, keep serving status, /metrics and the dashboard until SIGTERM.
        #[arg(long)]
        linger: bool,
    },
    /// Inspect configuration files.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Import and inspect stored market data.
    #[command(subcommand)]
    Data(DataCmd),
    /// The model registry: list, show, promote, roll back.
    #[command(subcommand)]
    Models(ModelsCmd),
    /// Train a model on the stored bars and register it as a candidate.
    #[command(subcommand)]
    Train(TrainCmd),
    /// Search hyper-parameters (many trials at once, early stopping); list and show the studies.
    #[command(subcommand)]
    Tune(tune::TuneCmd),
    /// Measure the speed of parts of tradebot.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Run the engine over stored bars with the simulated broker; metrics against buy-and-hold.
    Backtest(backtest::BacktestArgs),
    /// The paper or live account's own history over a period (a replay's too): its figures beside
    /// buy-and-hold, a tear sheet (--report) and its fills (--trades), from the store; beside a running
    /// daemon, from its read snapshot.
    Report(report::ReportArgs),
    /// Run a fake Alpaca server (trading and data REST, both WebSockets) on 127.0.0.1 for local testing,
    /// with `--market` a seeded synthetic market on its stream and REST history.
    FakeAlpaca(fake::FakeArgs),
    /// The kill switch: show it, or clear it after a trip (through the running daemon, if one runs).
    #[command(subcommand)]
    Risk(RiskCmd),
    /// Retrain now: asks the running daemon, or runs the retrain pipeline in the foreground when none runs.
    Retrain {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// ppo or lstm; both when omitted.
        #[arg(long)]
        kind: Option<String>,
        /// One JSON object per line (progress, then each run's record).
        #[arg(long)]
        json: bool,
    },
    /// The daemon's status (mode, feed, positions, orders, equity, models, last retrain, risk); without a
    /// daemon, what the state directory says.
    Status {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The status report as one JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Ask the running daemon to stop sending new orders (open orders are left alone).
    Pause {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Ask the running daemon to trade again after `pause` or `flatten`.
    Resume {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Ask the running daemon to sell every position, then pause.
    Flatten {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// The store's health and backups: check, backup, restore, reseal, list (the daemon must be stopped).
    #[command(subcommand)]
    Store(StoreCmd),
    /// Check the native libraries (ONNX Runtime, libtorch) and the GPU (CUDA driver, compute capability, NVRTC,
    /// NVML, the env kernel), and print where they come from.
    Doctor {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Require a usable GPU: without one, print "no GPU: <reason>" (or "GPU not usable: <reason>") and exit 1.
        #[arg(long)]
        gpu: bool,
    },
}

/// The config file used when none is named: `$TRADEBOT_CONFIG`, `./config/tradebot.toml`, then
/// `/etc/tradebot/tradebot.toml`.
pub fn default_config_path() -> PathBuf {
    if let Some(p) = std::env::var_os("TRADEBOT_CONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let local = Path::new("config/tradebot.toml");
    if local.is_file() {
        return local.to_path_buf();
    }
    PathBuf::from("/etc/tradebot/tradebot.toml")
}

fn load_config(path: Option<PathBuf>) -> Result<Config, ConfigError> {
    let named = path.is_some();
    let path = path.unwrap_or_else(default_config_path);
    if !named && !path.exists() {
        return Err(no_config_found());
    }
    let c = Config::load(&path)?;
    crate::logging::init(c.log_level);
    crate::store::set_cache_mb(c.store.cache_mb);
    Ok(c)
}

/// No `--config` and none found: the places searched (absolute) and how to point at one. The error
/// names no file as if it existed.
fn no_config_found() -> ConfigError {
    let cwd = std::env::current_dir().unwrap_or_default();
    let env = match std::env::var_os("TRADEBOT_CONFIG").filter(|p| !p.is_empty()) {
        Some(p) => format!("$TRADEBOT_CONFIG = {} (no such file)", cwd.join(p).display()),
        None => "$TRADEBOT_CONFIG (not set)".into(),
    };
    let local = cwd.join("config/tradebot.toml");
    ConfigError {
        file: PathBuf::new(),
        problems: vec![format!(
            "no config file found; searched {env}, {} (relative to the working directory) and \
             /etc/tradebot/tradebot.toml. Point at one with --config FILE or TRADEBOT_CONFIG=FILE (the demo is \
             config/tradebot.toml in a checkout; `make install` puts one in /etc/tradebot)",
            local.display()
        )],
    }
}

/// The state directory of a read-only command, which must exist: nothing is created. Missing, the error
/// gives its absolute path and how `state_dir` was resolved (a relative one is taken from the working
/// directory, not from the config file's).
fn existing_state_dir(config: &Config) -> anyhow::Result<&Path> {
    let dir = config.state_dir.as_path();
    if dir.is_dir() {
        return Ok(dir);
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| cwd.join(dir));
    let written = format!("state_dir = {:?} in {}", dir.display().to_string(), config.source.display());
    let resolved = if dir.is_absolute() {
        written
    } else {
        format!(
            "{written} is relative: it is taken from the working directory {}, not from the config file's",
            cwd.display()
        )
    };
    anyhow::bail!(
        "the state directory {} does not exist ({resolved}); nothing was read or created. Run from the directory \
         the daemon runs in, or make state_dir absolute; `tradebot run` creates it",
        absolute.display()
    )
}

/// The store of a read-only command: its state directory must exist (`existing_state_dir`), and it is
/// opened read-only (`Store::open_read_only`), or beside a running daemon as its read snapshot
/// (`control::beside`).
fn read_store(config: &Config) -> anyhow::Result<crate::store::Store> {
    use anyhow::Context as _;
    let dir = existing_state_dir(config)?;
    crate::control::beside::open_to_read(dir).context("opening the store")
}

/// The config when one is named or found; `None` when none is named and none exists (commands that can
/// work without one).
fn optional_config(path: Option<PathBuf>) -> Result<Option<Config>, ConfigError> {
    if path.is_none() && !default_config_path().exists() {
        return Ok(None);
    }
    load_config(path).map(Some)
}

/// Runs one command. Errors carry their context; a `ConfigError` in the chain means exit code 78.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The LSTM's training processes: libtorch's threads spin only briefly while they wait (`crate::lstm::omp`).
    #[cfg(feature = "train")]
    if matches!(cli.command, Command::Train(TrainCmd::Lstm(_)) | Command::Bench(BenchCmd::Lstm(_))) {
        crate::lstm::omp::spin_briefly();
    }
    // A simulated clock shared with `tradebot fake-alpaca --market --speed N` (see `crate::clock`).
    if let Some(sim) = crate::clock::from_env()? {
        crate::clock::install(sim)?;
    }
    // Training processes (the retrain child included) keep freed pages: see `crate::alloc`. The daemon does not.
    let training = matches!(cli.command, Command::Train(_) | Command::Tune(tune::TuneCmd::Ppo(_)));
    if training || matches!(cli.command, Command::Bench(BenchCmd::Ppo(_) | BenchCmd::Lstm(_) | BenchCmd::Tune(_))) {
        crate::alloc::keep_freed_pages();
    }
    if training {
        crate::retrain::child::die_with_parent();
        crate::retrain::memory::limit_self();
    }
    match cli.command {
        Command::Run { config, live, linger } => {
            let config = load_config(config)?;
            let opts = crate::daemon::RunOptions { live, linger };
            if let crate::daemon::RunEnd::Replay(summary) = crate::run(&config, opts, CancellationToken::new())?
                && !summary.printed
            {
                out!("{summary}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCmd::Check { file, config }) => {
            if let (Some(f), Some(c)) = (&file, &config)
                && f != c
            {
                anyhow::bail!("two config files named ({} and --config {}): name one", f.display(), c.display());
            }
            let c = load_config(file.or(config))?;
            let file = c.source.clone();
            crate::logging::init(c.log_level);
            out!("{}", c.to_toml())?;
            match crate::config::Credentials::load() {
                Ok(Some(cr)) => outln!("\n# Alpaca keys: found in {} (key id {:?})", cr.source, cr.key_id)?,
                Ok(None) => outln!("\n# Alpaca keys: not set (only needed for the alpaca feed or broker)")?,
                Err(e) => outln!("\n# Alpaca keys: {e}")?,
            }
            let problems = crate::config::machine_problems(&c);
            for p in &problems {
                errln!("{}: {p}", file.display());
            }
            if !problems.is_empty() {
                return Ok(ExitCode::from(crate::config::EX_CONFIG));
            }
            errln!("{}: ok", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Data(cmd) => data::run(cmd),
        Command::Models(cmd) => models::run(cmd),
        Command::FakeAlpaca(args) => fake::run(&args),
        Command::Doctor { config, gpu } => doctor::run(optional_config(config)?, gpu),
        Command::Risk(cmd) => risk::run(cmd),
        Command::Store(cmd) => store::run(cmd),
        Command::Retrain { config, kind, json } => retrain::run(config, kind, json),
        Command::Status { config, json } => status::run(config, json),
        Command::Pause { config } => control::run(config, crate::control::Request::Pause),
        Command::Resume { config } => control::run(config, crate::control::Request::Resume),
        Command::Flatten { config } => control::run(config, crate::control::Request::Flatten),
        Command::Bench(BenchCmd::Env(b)) => crate::bench::env::env(b),
        Command::Bench(BenchCmd::Ppo(b)) => crate::bench::ppo::ppo(b),
        Command::Train(TrainCmd::Ppo(a)) => train::ppo(a),
        Command::Bench(BenchCmd::Lstm(b)) => crate::bench::lstm::run(b),
        Command::Train(TrainCmd::Lstm(a)) => train::lstm(a),
        Command::Train(TrainCmd::Sac(a)) => train::sac(a),
        Command::Bench(BenchCmd::Infer(b)) => crate::bench::infer::infer(&load_config(b.config.clone())?, b),
        Command::Backtest(a) => backtest::run(a),
        Command::Report(a) => report::run(a),
        Command::Bench(BenchCmd::Tune(b)) => crate::bench::tune::tune(b),
        Command::Bench(BenchCmd::Gpu(b)) => crate::bench::gpu::gpu(b),
        Command::Tune(cmd) => tune::run(cmd),
    }
}

#[cfg(test)]
mod tests;
