//! Configuration: the TOML file (`raw`) parsed once, at start, into checked values (`Config`).
//!
//! Every problem names the file, the key, the value and the fix, all problems of a file are reported
//! together, and the process exits with `EX_CONFIG` (78). Alpaca keys never come from the file: they come
//! from the environment or systemd's `$CREDENTIALS_DIRECTORY` (`Credentials::load`), held as `Secret`s.

mod credentials;
mod effective;
mod env;
mod explain;
mod lstm;
mod machine;
mod notify;
mod ppo;
mod raw;
mod retrain;
mod risk;
mod sac;
mod secret;
mod strategy;
mod train;
mod tune;
mod web;

pub use credentials::{Credentials, KEY_ID_VAR, SECRET_KEY_VAR};
pub use lstm::{CutoffMetric, LstmConfig};
pub use machine::machine_problems;
pub use notify::{NotifyConfig, TELEGRAM_API};
pub use ppo::{CpuBackend, PpoConfig};
pub use raw::RawConfig;
pub use retrain::{GateConfig, RetrainConfig};
pub use risk::{BrokerConfig, RiskConfig};
pub use sac::SacConfig;
pub use secret::Secret;
pub use strategy::{DEFAULT_CUTOFF, StrategyConfig, StrategyMode};
pub use train::{AS_OF_ENV, Rolling, SEED_ENV, TrainConfig, retrain_seed, seed_from_env};
pub use tune::{Dist, SamplerKind, TUNABLE, TuneConfig, TuneMetric, default_space};
pub use web::{DEFAULT_HEADER_TIMEOUT_SECS, DEFAULT_MAX_CONNECTIONS, DEFAULT_WEB_LISTEN, WebConfig};

use crate::domain::{Symbol, Timeframe};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use url::Url;

/// `EX_CONFIG` from sysexits.h: what the process exits with on a bad configuration.
pub const EX_CONFIG: u8 = 78;

pub const DEFAULT_TRADING_URL_PAPER: &str = "https://paper-api.alpaca.markets";
pub const DEFAULT_TRADING_URL_LIVE: &str = "https://api.alpaca.markets";
pub const DEFAULT_DATA_URL: &str = "https://data.alpaca.markets";
pub const DEFAULT_STREAM_URL: &str = "wss://stream.data.alpaca.markets/v2/iex";
pub const DEFAULT_TRADE_UPDATES_URL_PAPER: &str = "wss://paper-api.alpaca.markets/stream";
pub const DEFAULT_TRADE_UPDATES_URL_LIVE: &str = "wss://api.alpaca.markets/stream";

/// A configuration that could not be used: every problem found, each naming the file and the key.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FeedKind {
    Replay,
    Alpaca,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BrokerKind {
    Sim,
    Alpaca,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KillSwitchAction {
    Halt,
    Flatten,
}

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub source: PathBuf,
    pub mode: Mode,
    pub state_dir: PathBuf,
    #[serde(serialize_with = "ser_display")]
    pub log_level: log::LevelFilter,
    pub alpaca: AlpacaConfig,
    pub market: MarketConfig,
    pub feed: FeedConfig,
    pub broker: BrokerConfig,
    pub risk: RiskConfig,
    pub runtime: RuntimeConfig,
    pub features: crate::features::FeatureSpec,
    pub env: crate::env::EnvConfig,
    pub train: TrainConfig,
    pub ppo: PpoConfig,
    /// `[sac]`: soft actor-critic (`tradebot train sac`, `retrain.algorithms`).
    pub sac: SacConfig,
    pub lstm: LstmConfig,
    pub retrain: RetrainConfig,
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
#[derive(Debug, Clone, Serialize)]
pub struct StoreConfig {
    /// sled's page cache in MiB (`cache_mb`, default `store::DEFAULT_CACHE_MB`, 8 to 16384).
    pub cache_mb: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AlpacaConfig {
    pub trading_url: Url,
    pub data_url: Url,
    pub stream_url: Url,
    pub trade_updates_url: Url,
    #[serde(serialize_with = "ser_secs")]
    pub request_timeout: Duration,
    /// How long one market-data call keeps retrying 429s and outages (`data_retry_secs`, default 120).
    #[serde(serialize_with = "ser_secs")]
    pub data_retry: Duration,
    /// The same for trading calls other than order POSTs (`trading_retry_secs`, default 30).
    #[serde(serialize_with = "ser_secs")]
    pub trading_retry: Duration,
    /// An order POST's 429 waits (`order_retry_secs`, default 10).
    #[serde(serialize_with = "ser_secs")]
    pub order_retry: Duration,
    /// How long start-up keeps retrying the account call before giving up (`start_retry_secs`, default 300).
    #[serde(serialize_with = "ser_secs")]
    pub start_retry: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct MarketConfig {
    pub symbols: Vec<Symbol>,
    pub timeframe: Timeframe,
    /// Bars a symbol without a bar of its own is carried at its last close (never traded) before it is
    /// reported down.
    pub max_stale_bars: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct FeedConfig {
    pub kind: FeedKind,
    /// Bars to import into the store before a replay, when it lacks them.
    pub file: Option<PathBuf>,
    /// Replay speed: 0 = as fast as possible, N = N times real time.
    pub speed: f64,
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

#[derive(Debug, Clone, Serialize)]
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
    pub fn train_dates(&self) -> Result<TrainConfig, String> {
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
            .map_err(|problem| ConfigError { file: path.to_path_buf(), problems: vec![problem] })?;
        Self::from_raw(path, raw)
    }

    pub fn from_raw(path: &Path, raw: RawConfig) -> Result<Config, ConfigError> {
        let mut c = Checker::default();
        let mode = c.choice("mode", raw.mode.as_deref(), "paper", &[("paper", Mode::Paper), ("live", Mode::Live)]);
        let state_dir = match raw.state_dir {
            Some(s) if s.trim().is_empty() => {
                c.problem(format!(
                    "state_dir = {s:?}: must name a directory, e.g. \"/var/lib/tradebot\" or \"./var\" (the store, models and control socket live there)"
                ));
                PathBuf::from("./var")
            }
            s => PathBuf::from(s.unwrap_or_else(|| "./var".into())),
        };
        let log_level = c.choice(
            "log_level",
            raw.log_level.as_deref(),
            "info",
            &[
                ("off", log::LevelFilter::Off),
                ("error", log::LevelFilter::Error),
                ("warn", log::LevelFilter::Warn),
                ("info", log::LevelFilter::Info),
                ("debug", log::LevelFilter::Debug),
                ("trace", log::LevelFilter::Trace),
            ],
        );
        let (trading_default, updates_default) = match mode {
            Mode::Live => (DEFAULT_TRADING_URL_LIVE, DEFAULT_TRADE_UPDATES_URL_LIVE),
            Mode::Paper => (DEFAULT_TRADING_URL_PAPER, DEFAULT_TRADE_UPDATES_URL_PAPER),
        };
        let a = raw.alpaca;
        let alpaca = AlpacaConfig {
            trading_url: c.url("alpaca.trading_url", a.trading_url.as_deref(), trading_default, &["https", "http"]),
            data_url: c.url("alpaca.data_url", a.data_url.as_deref(), DEFAULT_DATA_URL, &["https", "http"]),
            stream_url: c.url("alpaca.stream_url", a.stream_url.as_deref(), DEFAULT_STREAM_URL, &["wss", "ws"]),
            trade_updates_url: c.url(
                "alpaca.trade_updates_url",
                a.trade_updates_url.as_deref(),
                updates_default,
                &["wss", "ws"],
            ),
            request_timeout: Duration::from_secs_f64(c.range(
                "alpaca.request_timeout_secs",
                a.request_timeout_secs,
                10.0,
                (0.0, false),
                (300.0, true),
            )),
            data_retry: Duration::from_secs_f64(c.range(
                "alpaca.data_retry_secs",
                a.data_retry_secs,
                120.0,
                (0.0, true),
                (3600.0, true),
            )),
            trading_retry: Duration::from_secs_f64(c.range(
                "alpaca.trading_retry_secs",
                a.trading_retry_secs,
                30.0,
                (0.0, true),
                (3600.0, true),
            )),
            order_retry: Duration::from_secs_f64(c.range(
                "alpaca.order_retry_secs",
                a.order_retry_secs,
                10.0,
                (0.0, true),
                (3600.0, true),
            )),
            start_retry: Duration::from_secs_f64(c.range(
                "alpaca.start_retry_secs",
                a.start_retry_secs,
                300.0,
                (0.0, true),
                (3600.0, true),
            )),
        };
        // A paper config must not point at the live host, nor the reverse: the mode is the one switch.
        let host = alpaca.trading_url.host_str().unwrap_or_default().to_string();
        if mode == Mode::Paper && host == "api.alpaca.markets" {
            c.problem(format!(
                "alpaca.trading_url = {:?}: that is the live host but mode = \"paper\"; use {DEFAULT_TRADING_URL_PAPER} or set mode = \"live\"",
                alpaca.trading_url.as_str()
            ));
        }
        if mode == Mode::Live && host.starts_with("paper-api.") {
            c.problem(format!(
                "alpaca.trading_url = {:?}: that is the paper host but mode = \"live\"; use {DEFAULT_TRADING_URL_LIVE} or set mode = \"paper\"",
                alpaca.trading_url.as_str()
            ));
        }
        // The same for the order-updates stream, which lives on the trading host.
        let updates_host = alpaca.trade_updates_url.host_str().unwrap_or_default().to_string();
        if mode == Mode::Paper && updates_host == "api.alpaca.markets" {
            c.problem(format!(
                "alpaca.trade_updates_url = {:?}: that is the live host but mode = \"paper\"; use {DEFAULT_TRADE_UPDATES_URL_PAPER} or set mode = \"live\"",
                alpaca.trade_updates_url.as_str()
            ));
        }
        if mode == Mode::Live && updates_host.starts_with("paper-api.") {
            c.problem(format!(
                "alpaca.trade_updates_url = {:?}: that is the paper host but mode = \"live\"; use {DEFAULT_TRADE_UPDATES_URL_LIVE} or set mode = \"paper\"",
                alpaca.trade_updates_url.as_str()
            ));
        }

        let m = raw.market;
        let mut symbols = Vec::new();
        match m.symbols {
            None => c.problem(
                "market.symbols is missing: list the symbols to trade, e.g. symbols = [\"AAPL\", \"MSFT\"]".into(),
            ),
            Some(list) if list.is_empty() => c.problem("market.symbols = []: list at least one symbol".into()),
            Some(list) => {
                for s in list {
                    match Symbol::new(&s) {
                        Ok(sym) if symbols.contains(&sym) => {
                            c.problem(format!("market.symbols: {s:?} is listed twice"))
                        }
                        Ok(sym) => match sym.alpaca_spelling() {
                            Ok(()) => symbols.push(sym),
                            Err(fix) => c.problem(format!("market.symbols: {s:?}: {fix}")),
                        },
                        Err(e) => c.problem(format!("market.symbols: {e}")),
                    }
                }
            }
        }
        let timeframe = match Timeframe::parse(m.timeframe.as_deref().unwrap_or("1Day")) {
            Ok(tf) => tf,
            Err(e) => {
                c.problem(format!("market.timeframe = {:?}: {e}", m.timeframe.unwrap_or_default()));
                Timeframe::DAY1
            }
        };
        let max_stale_bars = m.max_stale_bars.unwrap_or(3);
        if max_stale_bars > 10_000 {
            c.problem(format!("market.max_stale_bars = {max_stale_bars}: use at most 10000 (bars)"));
        }
        let market = MarketConfig { symbols, timeframe, max_stale_bars };

        let f = raw.feed;
        let feed = FeedConfig {
            kind: c.choice(
                "feed.kind",
                f.kind.as_deref(),
                "replay",
                &[("replay", FeedKind::Replay), ("alpaca", FeedKind::Alpaca)],
            ),
            file: f.file.map(PathBuf::from),
            speed: c.range("feed.speed", f.speed, 0.0, (0.0, true), (1.0e6, true)),
            from: c.date("feed.from", f.from.as_deref()),
            to: c.date("feed.to", f.to.as_deref()),
        };
        if let (Some(from), Some(to)) = (feed.from, feed.to)
            && from > to
        {
            c.problem(format!("feed.from = {from} is after feed.to = {to}: swap them"));
        }

        let broker = c.broker(raw.broker, mode);
        let risk = c.risk(raw.risk, timeframe, mode);
        let runtime = RuntimeConfig { onnxruntime_lib: raw.runtime.onnxruntime_lib.map(PathBuf::from) };
        let features = c.features(raw.features);
        let env = c.env(raw.env, &broker);
        let train = c.train(raw.train);
        let ppo = raw.ppo;
        if let Err(e) = ppo.validate() {
            c.problem(e);
        }
        let sac = raw.sac;
        if let Err(e) = sac.validate() {
            c.problem(e);
        }
        let mut retrain = c.retrain(raw.retrain);
        retrain.gate.objective = env.reward.objective();
        let web = c.web(raw.web);
        let notify = c.notify(raw.notify);
        let lstm = raw.lstm;
        if let Err(e) = lstm.validate() {
            c.problem(e);
        }
        let strategy = raw.strategy;
        if let Err(e) = strategy.validate() {
            c.problem(e);
        }
        let tune = raw.tune;
        if let Err(e) = tune.validate() {
            c.problem(e);
        }
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

/// `key = value` within [lo, hi], or the problem naming the key, the value and the range (the sections
/// that check themselves: `[ppo]`, `[sac]`, `[lstm]`, `[tune]`).
pub(crate) fn within(key: &str, value: u64, lo: u64, hi: u64) -> Result<(), String> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(format!("{key} = {value}: must be a whole number in [{lo}, {hi}]"))
    }
}

/// Collects problems while parsing, so one run reports all of them.
#[derive(Default)]
struct Checker {
    problems: Vec<String>,
}

impl Checker {
    fn problem(&mut self, p: String) {
        self.problems.push(p);
    }

    fn choice<T: Copy>(&mut self, key: &str, v: Option<&str>, default: &str, options: &[(&str, T)]) -> T {
        let v = v.unwrap_or(default);
        if let Some((_, t)) = options.iter().find(|(name, _)| *name == v) {
            return *t;
        }
        let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
        self.problem(format!("{key} = {v:?}: must be one of {}", names.join(", ")));
        options[0].1
    }

    /// A whole number in [lo, hi].
    fn count(&mut self, key: &str, v: Option<u64>, default: u64, lo: u64, hi: u64) -> u64 {
        let x = v.unwrap_or(default);
        if (lo..=hi).contains(&x) {
            return x;
        }
        self.problem(format!("{key} = {x}: must be a whole number in [{lo}, {hi}]"));
        default
    }

    /// An optional whole number in [lo, hi] (`None` stays `None`).
    fn count_opt(&mut self, key: &str, v: Option<u64>, lo: u64, hi: u64) -> Option<u64> {
        let x = v?;
        if (lo..=hi).contains(&x) {
            return Some(x);
        }
        self.problem(format!("{key} = {x}: must be a whole number in [{lo}, {hi}] (or omit it)"));
        None
    }

    /// A number in a range; each bound is (value, inclusive).
    fn range(&mut self, key: &str, v: Option<f64>, default: f64, lo: (f64, bool), hi: (f64, bool)) -> f64 {
        let x = v.unwrap_or(default);
        let above = if lo.1 { x >= lo.0 } else { x > lo.0 };
        let below = if hi.1 { x <= hi.0 } else { x < hi.0 };
        if x.is_finite() && above && below {
            return x;
        }
        let (l, r) = (if lo.1 { '[' } else { '(' }, if hi.1 { ']' } else { ')' });
        self.problem(format!("{key} = {x}: must be in {l}{}, {}{r}", lo.0, hi.0));
        default
    }

    fn url(&mut self, key: &str, v: Option<&str>, default: &str, schemes: &[&str]) -> Url {
        let s = v.unwrap_or(default);
        match Url::parse(s) {
            Ok(u) if schemes.contains(&u.scheme()) && u.host_str().is_some() => u,
            Ok(u) => {
                self.problem(format!(
                    "{key} = {s:?}: scheme {:?} is not allowed here; use {}://",
                    u.scheme(),
                    schemes.join(":// or ")
                ));
                Url::parse(default).unwrap_or(u)
            }
            Err(e) => {
                self.problem(format!("{key} = {s:?}: not a URL ({e}); e.g. {default}"));
                Url::parse(default).unwrap_or_else(|_| Url::parse("http://127.0.0.1/").expect("literal URL parses"))
            }
        }
    }

    fn date(&mut self, key: &str, v: Option<&str>) -> Option<NaiveDate> {
        let s = v?;
        match NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            Ok(d) => Some(d),
            Err(_) => {
                self.problem(format!("{key} = {s:?}: not a date; write YYYY-MM-DD"));
                None
            }
        }
    }

    fn positive_decimal(&mut self, key: &str, v: Option<&str>, default: &str) -> Decimal {
        let s = v.unwrap_or(default);
        match s.trim().parse::<Decimal>() {
            Ok(d) if d > Decimal::ZERO => d,
            _ => {
                self.problem(format!(
                    "{key} = {s:?}: must be a decimal number above zero, written as a string, e.g. \"{default}\""
                ));
                default.parse().unwrap_or(Decimal::ONE)
            }
        }
    }
}

#[cfg(test)]
mod tests;
