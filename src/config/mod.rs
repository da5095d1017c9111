//! Configuration: the TOML file (`raw`) parsed once, at start, into checked values (`Config`).
//!
//! Every problem names the file, the key, the value and the fix, all problems of a file are reported
//! together, and the process exits with `EX_CONFIG` (78). Alpaca keys never come from the file: they come
//! from the environment or systemd's `$CREDENTIALS_DIRECTORY` (`Credentials::load`), held as `Secret`s.

mod alpaca;
mod checker;
mod credentials;
mod effective;
mod env;
mod explain;
mod lstm;
mod machine;
mod market;
mod notify;
mod ppo;
mod raw;
mod reload;
mod retrain;
mod risk;
mod sac;
mod secret;
mod strategy;
mod train;
mod tune;
mod web;

pub(crate) use alpaca::AlpacaConfig;
use checker::Checker;
pub(crate) use checker::Invalid;
pub(crate) use checker::within;
pub(crate) use credentials::Credentials;
#[cfg(test)]
pub(crate) use credentials::{KEY_ID_VAR, SECRET_KEY_VAR};
pub use lstm::{CutoffMetric, LstmConfig};
pub(crate) use machine::machine_problems;
pub(crate) use market::{FeedConfig, MarketConfig};
pub(crate) use notify::NotifyConfig;
#[cfg(test)]
pub(crate) use notify::TELEGRAM_API;
// Public where `rl` (feature `train`) re-exports it.
#[cfg(feature = "train")]
pub use ppo::PpoConfig;
#[cfg(not(feature = "train"))]
pub(crate) use ppo::PpoConfig;
#[cfg(feature = "train")]
pub use ppo::{CpuBackend, PpoShape, PpoTuned};
// `bench ppo --cpu-backend` parses into it in every build.
#[cfg(not(feature = "train"))]
pub(crate) use ppo::CpuBackend;
pub(crate) use raw::RawConfig;
pub(crate) use retrain::{GateConfig, RetrainConfig};
pub(crate) use risk::{BrokerConfig, RiskConfig};
// Public where `rl` (feature `train`) re-exports it.
#[cfg(feature = "train")]
pub use sac::SacConfig;
#[cfg(not(feature = "train"))]
pub(crate) use sac::SacConfig;
pub(crate) use secret::Secret;
pub(crate) use strategy::DEFAULT_CUTOFF;
pub use strategy::{StrategyConfig, StrategyMode};
#[cfg(test)]
pub(crate) use train::Rolling;
#[cfg(feature = "train")]
pub(crate) use train::seed_from_env;
pub(crate) use train::{AS_OF_ENV, SEED_ENV, TrainConfig, retrain_seed};
#[cfg(test)]
pub(crate) use tune::default_space;
pub(crate) use tune::{ALGORITHM, Dist, TuneConfig, algorithm_of_code};
#[cfg(feature = "train")]
pub(crate) use tune::{SamplerKind, TuneMetric};
pub(crate) use web::{DEFAULT_HEADER_TIMEOUT_SECS, DEFAULT_MAX_CONNECTIONS, WebConfig};

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `EX_CONFIG` from sysexits.h: what the process exits with on a bad configuration.
pub const EX_CONFIG: u8 = 78;

/// A configuration that could not be used: every problem found, each naming the file and the key.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// The configuration file (empty when none was found).
    pub file: PathBuf,
    /// Every problem found, each naming its key and the fix; one line each when displayed.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            // No file (none was found): the problem alone.
            if self.file.as_os_str().is_empty() {
                write!(f, "{p}")?;
            } else {
                write!(f, "{}: {p}", self.file.display())?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Paper,
    Live,
}

impl Mode {
    /// Its name in the config and the status report (`paper`, `live`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Paper => "paper",
            Mode::Live => "live",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FeedKind {
    Replay,
    Alpaca,
}

impl FeedKind {
    /// Its name in the config and the status report (`replay`, `alpaca`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FeedKind::Replay => "replay",
            FeedKind::Alpaca => "alpaca",
        }
    }
}

impl std::fmt::Display for FeedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BrokerKind {
    Sim,
    Alpaca,
}

/// What a tripped kill switch does (`risk.kill_switch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KillSwitchAction {
    /// No order passes, sells neither; holdings stay as they are until the switch is cleared.
    Halt,
    /// Only sells that reduce a long holding pass, and every long holding is sold.
    Flatten,
}

/// The configuration file, parsed once at start into checked values (URLs, durations, symbols, decimal money).
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// The file it was read from, as given.
    pub source: PathBuf,
    /// `mode`: `paper` (Alpaca's paper account, the default) or `live` (real money).
    pub mode: Mode,
    /// `state_dir`: where the store, snapshots, models and the control socket live.
    pub state_dir: PathBuf,
    /// `log_level`: the most verbose level logged (`error` to `trace`).
    #[serde(serialize_with = "ser_display")]
    pub log_level: log::LevelFilter,
    /// `[alpaca]`: the trading, data and stream endpoints, the request timeout and the retry budgets.
    pub alpaca: AlpacaConfig,
    /// `[market]`: the symbols traded and the bar timeframe.
    pub market: MarketConfig,
    /// `[feed]`: where bars come from (Alpaca's stream, or a replay of stored bars).
    pub feed: FeedConfig,
    /// `[broker]`: where orders go (Alpaca, or the simulated broker), its starting cash, fees and slippage.
    pub broker: BrokerConfig,
    /// `[risk]`: the limits every order passes and the kill switch.
    pub risk: RiskConfig,
    /// `[runtime]`: the ONNX Runtime library to load.
    pub runtime: RuntimeConfig,
    /// `[features]`: the feature set the models see (return horizons, volatility and moving-average windows, ...).
    pub features: crate::features::FeatureSpec,
    /// `[env]`: the training environment (envs, episode length, reward, costs).
    pub env: crate::env::EnvConfig,
    /// `[train]`: the bars the trainers learn from and the holdout they never see (fixed dates or rolling).
    pub train: TrainConfig,
    /// `[ppo]`: proximal policy optimisation's hyper-parameters.
    pub ppo: PpoConfig,
    /// `[sac]`: soft actor-critic (`tradebot train sac`, `retrain.algorithms`).
    pub sac: SacConfig,
    /// `[lstm]`: the LSTM direction classifier's hyper-parameters.
    pub lstm: LstmConfig,
    /// `[retrain]`: the weekend retrain (schedule, budgets, the promotion gate).
    pub retrain: RetrainConfig,
    /// `[web]`: the `/metrics` endpoint and the dashboard.
    pub web: WebConfig,
    /// `[notify]`: where alerts go.
    pub notify: NotifyConfig,
    /// `[strategy]`: how the engine turns model outputs into trades.
    pub strategy: StrategyConfig,
    /// `[tune]`: hyper-parameter searches (`tradebot tune ppo`).
    pub tune: TuneConfig,
    /// `[store]`: the sled database.
    pub store: StoreConfig,
}

/// `[store]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreConfig {
    /// sled's page cache in MiB (`cache_mb`, default `store::DEFAULT_CACHE_MB`, 8 to 16384).
    pub cache_mb: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeConfig {
    pub onnxruntime_lib: Option<PathBuf>,
}

fn ser_display<T: fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Config {
    /// The `[train]` dates a training run uses: a rolling window resolved on `$TRADEBOT_TRAIN_AS_OF` (a
    /// retrain's day), else, for a replay with a start date, on the day before the replay starts (so
    /// that the replay trades out of sample), else today.
    pub fn train_dates(&self) -> Result<TrainConfig, Invalid> {
        let replay_start = match (self.feed.kind, self.feed.from) {
            (FeedKind::Replay, Some(from)) => from.pred_opt(),
            _ => None,
        };
        self.train.resolve_from_env(replay_start.unwrap_or_else(|| crate::clock::now().date_naive()))
    }

    /// Reads and parses a config file. The error lists every problem, each prefixed with the file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let fail = |p: String| ConfigError { file: path.to_path_buf(), problems: vec![p] };
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read the file: {e}")))?;
        Self::parse(path, &text)
    }

    /// Parses config text; `path` is only used to name the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let raw = explain::deserialize(text)
            .map_err(|problem| ConfigError { file: path.to_path_buf(), problems: vec![problem.to_string()] })?;
        Self::from_raw(path, raw)
    }

    /// Checks a parsed file (`path` names it in the errors): every problem is collected, not only the first.
    pub fn from_raw(path: &Path, raw: RawConfig) -> Result<Config, ConfigError> {
        let mut c = Checker::default();
        let mode = c.choice("mode", raw.mode.as_deref(), "paper", &[("paper", Mode::Paper), ("live", Mode::Live)]);
        let state_dir = c.state_dir(raw.state_dir);
        let log_level = c.log_level(raw.log_level.as_deref());
        let alpaca = c.alpaca(raw.alpaca, mode);
        let market = c.market(raw.market);
        let feed = c.feed(raw.feed);
        let broker = c.broker(raw.broker, mode);
        let risk = c.risk(raw.risk, market.timeframe, mode);
        let runtime = RuntimeConfig { onnxruntime_lib: raw.runtime.onnxruntime_lib.map(PathBuf::from) };
        let features = c.features(raw.features);
        let env = c.env(raw.env, &broker);
        let train = c.train(raw.train);
        let ppo = raw.ppo;
        c.check(ppo.validate());
        let sac = raw.sac;
        c.check(sac.validate());
        let mut retrain = c.retrain(raw.retrain);
        retrain.gate.objective = env.reward.objective();
        let web = c.web(raw.web);
        let notify = c.notify(raw.notify);
        let lstm = raw.lstm;
        c.check(lstm.validate());
        let strategy = raw.strategy;
        c.check(strategy.validate());
        let tune = raw.tune;
        c.check(tune.validate());
        let store = StoreConfig {
            cache_mb: c.range(
                "store.cache_mb",
                raw.store.cache_mb,
                crate::store::DEFAULT_CACHE_MB as f64,
                (8.0, true),
                (16384.0, true),
            ) as u64,
        };
        if strategy.mode == StrategyMode::Lstm && strategy.lstm_position_pct > risk.max_position_pct {
            c.problem(format!(
                "strategy.lstm_position_pct = {} is above risk.max_position_pct = {}: every LSTM buy to its target would be refused; lower it",
                strategy.lstm_position_pct, risk.max_position_pct
            ));
        }

        if c.problems.is_empty() {
            Ok(Config {
                source: path.to_path_buf(),
                mode,
                state_dir,
                log_level,
                alpaca,
                market,
                feed,
                broker,
                risk,
                runtime,
                features,
                env,
                train,
                ppo,
                sac,
                lstm,
                retrain,
                web,
                notify,
                strategy,
                tune,
                store,
            })
        } else {
            Err(ConfigError { file: path.to_path_buf(), problems: c.problems })
        }
    }

    /// The effective configuration as TOML, for `tradebot config check`, in the file's own keys: it
    /// parses back to the same configuration.
    pub fn to_toml(&self) -> String {
        effective::to_toml(self).unwrap_or_else(|e| format!("# cannot render the config: {e}\n"))
    }
}

impl Checker {
    /// `state_dir`: a directory's name (`./var` when left out).
    fn state_dir(&mut self, v: Option<String>) -> PathBuf {
        match v {
            Some(s) if s.trim().is_empty() => {
                self.problem(format!(
                    "state_dir = {s:?}: must name a directory, e.g. \"/var/lib/tradebot\" or \"./var\" (the store, models and control socket live there)"
                ));
                PathBuf::from("./var")
            }
            s => PathBuf::from(s.unwrap_or_else(|| "./var".into())),
        }
    }

    fn log_level(&mut self, v: Option<&str>) -> log::LevelFilter {
        self.choice(
            "log_level",
            v,
            "info",
            &[
                ("off", log::LevelFilter::Off),
                ("error", log::LevelFilter::Error),
                ("warn", log::LevelFilter::Warn),
                ("info", log::LevelFilter::Info),
                ("debug", log::LevelFilter::Debug),
                ("trace", log::LevelFilter::Trace),
            ],
        )
    }
}

#[cfg(test)]
mod tests;
