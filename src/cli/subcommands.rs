//! The arguments of the command groups (`models`, `store`, `risk`, `train`, `bench`, `config`, `data`).

use clap::Subcommand;
use std::path::PathBuf;

/// `tradebot models`: list, show, promote, seed and roll back model versions.
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
        /// The model's id, as `models list` shows it (e.g. ppo-fee6be4c55483f7a).
        id: String,
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Make a model the champion of its kind by hand; the previous champion is retired.
    Promote {
        /// The model's id, as `models list` shows it (e.g. ppo-fee6be4c55483f7a).
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

/// `tradebot store`: check, back up, restore, reseal and list the daemon's store.
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

/// `tradebot risk`: the risk state (kill switch, loss limits) and clearing it.
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
    /// Clear a tripped kill switch; who cleared it and when goes to the log. A running daemon clears it
    /// (its engine trades again from the next bar); with none, the store is changed here.
    Clear {
        /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

/// `tradebot train`: train a model (PPO, SAC or the LSTM) and register it as a candidate.
#[derive(Debug, Subcommand)]
pub enum TrainCmd {
    /// PPO on the trading environment over the [train] range; exports ONNX, registers a candidate.
    Ppo(super::train::PpoArgs),
    /// SAC on the same environment (twin critics, tuned entropy); exports its actor to ONNX, registers a
    /// candidate policy served like PPO's.
    Sac(super::train::SacArgs),
    /// The LSTM direction classifier (fast, slow and context windows; early stopping on validation MCC).
    Lstm(super::train::LstmArgs),
}

/// `tradebot bench`: the benchmarks (environment, training, inference, search, GPU).
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

/// `tradebot config`: inspect configuration files.
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

/// `tradebot data`: import, fetch and show the stored bars.
#[derive(Debug, Subcommand)]
pub enum DataCmd {
    /// Load bars (CSV or JSON lines, plain or .gz) into the store; CSV is split-adjusted from the
    /// adjusted close. A running daemon imports the file itself (it must be able to read it); with none,
    /// the store is changed here.
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
    Fetch(super::fetch::FetchArgs),
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
