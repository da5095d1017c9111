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
mod retrain;
mod risk;
mod status;
mod store;
mod train;
mod tune;

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
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

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
    /// Run a fake Alpaca server (trading and data REST, both WebSockets) on 127.0.0.1 for local testing,
    /// with `--market` a seeded synthetic market on its stream and REST history.
    FakeAlpaca(fake::FakeArgs),
    /// The kill switch: show it, or clear it after a trip (the daemon must be stopped).
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

#[derive(Debug, Subcommand)]
pub enum ModelsCmd {
    /// Every model version with its state and metrics.
    List {
        /// Every model's manifest as a JSON array instead of the table.
        #[arg(long)]
        json: bool,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// One model's manifest (its ONNX file's hash is verified).
    Show {
        /// The model's id, as `models list` shows it (e.g. ppo-4840de6a1780e0c0).
        id: String,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Make a model the champion of its kind by hand; the previous champion is retired.
    Promote {
        /// The model's id, as `models list` shows it (e.g. ppo-4840de6a1780e0c0).
        id: String,
        /// Why, as the registry's history records it.
        #[arg(long, default_value = "manual promotion")]
        reason: String,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Import the models under --from (the shipped ones by default) that the registry lacks, and make one
    /// champion for each kind that has none, of the models that fit the config (symbols, timeframe,
    /// features); a model that does not fit is not crowned, and the command says why and exits 1.
    Seed {
        /// The directory of shipped models.
        #[arg(long, default_value = "models")]
        from: PathBuf,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Put back the champion that the current one replaced (kind: ppo or lstm).
    Rollback {
        /// The kind whose champion goes back: ppo or lstm.
        kind: String,
        /// Why, as the registry's history records it.
        #[arg(long, default_value = "manual rollback")]
        reason: String,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum StoreCmd {
    /// Read every record of a copy of the store and compare it with its sentinel; exit 65 when damaged.
    Check {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The replay's store (<state_dir>/replay) instead of the daemon's.
        #[arg(long)]
        replay: bool,
    },
    /// Write a consistent copy of the store to <state_dir>/backups.
    Backup {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The replay's store (<state_dir>/replay) instead of the daemon's.
        #[arg(long)]
        replay: bool,
    },
    /// Put a backup back (the newest when FILE is omitted); the replaced database is kept beside it.
    Restore {
        /// The backup file to put back (one of `store list`'s); default: the newest.
        file: Option<PathBuf>,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The replay's store (<state_dir>/replay) instead of the daemon's.
        #[arg(long)]
        replay: bool,
    },
    /// Accept the database as it is now (after `check` refused it and you decided to keep it).
    Reseal {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The replay's store (<state_dir>/replay) instead of the daemon's.
        #[arg(long)]
        replay: bool,
    },
    /// The backups, oldest first.
    List {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The replay's store (<state_dir>/replay) instead of the daemon's.
        #[arg(long)]
        replay: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum RiskCmd {
    /// Whether the kill switch is tripped (when, why, the equity numbers), the day's opening equity, the limits.
    Status {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The kill switch, the day's opening equity and the limits as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Clear a tripped kill switch; who cleared it and when goes to the log.
    Clear {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TrainCmd {
    /// PPO on the trading environment over the [train] range; exports ONNX, registers a candidate.
    Ppo(train::PpoArgs),
    /// SAC on the same environment (twin critics, tuned entropy); exports its actor to ONNX, registers a
    /// candidate policy served like PPO's.
    Sac(train::SacArgs),
    /// The LSTM direction classifier (fast, slow and context windows; early stopping on validation MCC).
    Lstm(train::LstmArgs),
}

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Step the vectorized trading environment with random actions; prints env-steps/s and asset-steps/s.
    Env(crate::bench::env::EnvBench),
    /// End-to-end PPO training (rollouts + updates) on the trading env; prints env-steps/s and the config.
    Ppo(crate::bench::ppo::PpoBench),
    /// Train the LSTM classifier on synthetic data of the report's shape; prints epoch time and samples/s.
    Lstm(crate::bench::lstm::LstmBench),
    /// Per-decision latency of the daemon's engine (features, inference, strategy, risk, order records), p50/p99 in µs.
    Infer(crate::bench::infer::InferBench),
    /// A search's training work: N trials of the same network and steps, P at a time; prints trials/hour.
    Tune(crate::bench::tune::TuneBench),
    /// The GPU figures in one run (env kernel, PPO, LSTM, GPU busy %); "no GPU" and exit 1 without one.
    Gpu(crate::bench::gpu::GpuBench),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Validate a config file and print the effective configuration (in the file's own keys), secrets
    /// masked; also checks that feed.file exists and state_dir is writable.
    Check {
        /// The configuration file (or --config).
        file: Option<PathBuf>,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum DataCmd {
    /// Load bars (CSV or JSON lines, plain or .gz) into the store; CSV is split-adjusted from the
    /// adjusted close.
    ///
    /// CSV layouts: Ticker,Date,Open,High,Low,Close,Volume[,Adj Close] (many symbols), or
    /// Date,Open,High,Low,Close,Volume[,Adj Close] in any order with --symbol (Yahoo Finance's download).
    /// Dates: YYYY-MM-DD, M/D/YYYY, YYYY/MM/DD or RFC 3339. JSON lines: Alpaca's bars
    /// ({"t","o","h","l","c","v"} with "S" or --symbol), e.g. `tradebot data show --json`'s output.
    Import {
        /// The file to load: CSV or JSON lines, plain or gzip-compressed (.gz).
        file: PathBuf,
        /// Only these symbols (comma-separated), for files with a Ticker column.
        #[arg(long, value_delimiter = ',')]
        symbols: Vec<String>,
        /// The symbol of a file without a Ticker column (or of JSON lines without "S").
        #[arg(long)]
        symbol: Option<String>,
        /// The bars' timeframe (1Day, 1Hour, 15Min, 1Min, ...).
        #[arg(long, default_value = "1Day")]
        timeframe: String,
        /// A date format for dates none of the built-in ones read (chrono's syntax, e.g. %d.%m.%Y).
        #[arg(long)]
        date_format: Option<String>,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Download missing bars from Alpaca's data API into the store (incremental).
    Fetch(fetch::FetchArgs),
    /// Print stored bars.
    Show {
        /// The symbol whose bars to print, e.g. AAPL.
        symbol: String,
        /// First day (YYYY-MM-DD), inclusive.
        #[arg(long)]
        from: String,
        /// Last day (YYYY-MM-DD), inclusive.
        #[arg(long)]
        to: String,
        /// The bars' timeframe (1Day, 1Hour, 15Min, 1Min, ...).
        #[arg(long, default_value = "1Day")]
        timeframe: String,
        /// One JSON object per bar and line: {"t","o","h","l","c","v"}.
        #[arg(long)]
        json: bool,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
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
            if let crate::daemon::Outcome::Replay(summary) = crate::run(&config, opts, CancellationToken::new())?
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
        Command::Bench(BenchCmd::Tune(b)) => crate::bench::tune::tune(b),
        Command::Bench(BenchCmd::Gpu(b)) => crate::bench::gpu::gpu(b),
        Command::Tune(cmd) => tune::run(cmd),
    }
}

#[cfg(test)]
mod help_tests;
