//! `RawConfig`: the TOML file as written, mirrored by serde with `deny_unknown_fields`. Nothing outside
//! `config` sees these types; `Config::from_raw` turns them into checked values once, at start.

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub mode: Option<String>,
    pub state_dir: Option<String>,
    pub log_level: Option<String>,
    #[serde(default)]
    pub alpaca: RawAlpaca,
    #[serde(default)]
    pub market: RawMarket,
    #[serde(default)]
    pub feed: RawFeed,
    #[serde(default)]
    pub broker: RawBroker,
    #[serde(default)]
    pub risk: RawRisk,
    #[serde(default)]
    pub runtime: RawRuntime,
    #[serde(default)]
    pub features: RawFeatures,
    #[serde(default)]
    pub env: RawEnv,
    #[serde(default)]
    pub train: RawTrain,
    #[serde(default)]
    pub ppo: super::PpoConfig,
    #[serde(default)]
    pub sac: super::SacConfig,
    #[serde(default)]
    pub lstm: super::LstmConfig,
    #[serde(default)]
    pub retrain: RawRetrain,
    #[serde(default)]
    pub web: RawWeb,
    #[serde(default)]
    pub notify: RawNotify,
    #[serde(default)]
    pub strategy: super::StrategyConfig,
    #[serde(default)]
    pub tune: super::TuneConfig,
    #[serde(default)]
    pub store: RawStore,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub cache_mb: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAlpaca {
    pub trading_url: Option<String>,
    pub data_url: Option<String>,
    pub stream_url: Option<String>,
    pub trade_updates_url: Option<String>,
    pub request_timeout_secs: Option<f64>,
    pub data_retry_secs: Option<f64>,
    pub trading_retry_secs: Option<f64>,
    pub order_retry_secs: Option<f64>,
    pub start_retry_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMarket {
    pub symbols: Option<Vec<String>>,
    pub timeframe: Option<String>,
    pub max_stale_bars: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFeed {
    pub kind: Option<String>,
    pub file: Option<String>,
    pub speed: Option<f64>,
    pub from: Option<String>,
    pub to: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBroker {
    pub kind: Option<String>,
    pub initial_cash: Option<String>,
    pub fee_bps: Option<f64>,
    pub slippage_bps: Option<f64>,
    pub cancel_on_shutdown: Option<bool>,
    pub lost_after_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRisk {
    pub max_position_pct: Option<f64>,
    pub max_gross_exposure_pct: Option<f64>,
    pub max_order_notional: Option<String>,
    pub daily_loss_limit_pct: Option<f64>,
    pub kill_switch: Option<String>,
    pub max_bar_age_secs: Option<u64>,
    pub extended_hours: Option<bool>,
    pub max_working_orders: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRuntime {
    pub onnxruntime_lib: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFeatures {
    pub return_horizons: Option<Vec<u64>>,
    pub vol_windows: Option<Vec<u64>>,
    pub sma_windows: Option<Vec<u64>>,
    pub ema_spans: Option<Vec<u64>>,
    pub macd_fast: Option<u64>,
    pub macd_slow: Option<u64>,
    pub macd_signal: Option<u64>,
    pub rsi_period: Option<u64>,
    pub cci_period: Option<u64>,
    pub adx_period: Option<u64>,
    pub bb_window: Option<u64>,
    pub bb_k: Option<f64>,
    pub volume_z_window: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnv {
    pub n_envs: Option<u64>,
    pub episode_len: Option<u64>,
    pub initial_cash: Option<f64>,
    pub max_trade: Option<f64>,
    pub min_order: Option<f64>,
    pub fee_bps: Option<f64>,
    pub slippage_bps: Option<f64>,
    pub trailing_stop_pct: Option<f64>,
    pub cooldown_bars: Option<u64>,
    pub integer_units: Option<bool>,
    pub buy_cap: Option<String>,
    pub accounting: Option<String>,
    pub reward_scale: Option<f64>,
    pub turnover_penalty: Option<f64>,
    pub turbulence_threshold: Option<f64>,
    pub seed: Option<u64>,
    pub action_space: Option<String>,
    pub no_trade_band: Option<f64>,
    pub max_weight: Option<f64>,
    pub reward: Option<String>,
    pub benchmark: Option<String>,
    pub turnover_bps: Option<f64>,
    pub sharpe_eta: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrain {
    pub from: Option<String>,
    pub to: Option<String>,
    pub holdout_from: Option<String>,
    pub holdout_to: Option<String>,
    pub window_days: Option<u32>,
    pub holdout_days: Option<u32>,
    pub checkpoint_every: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetrain {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    pub timezone: Option<String>,
    pub time_budget_secs: Option<f64>,
    pub gpu_memory_mb: Option<u64>,
    pub memory_mb: Option<u64>,
    pub ppo_steps: Option<u64>,
    pub sac_steps: Option<u64>,
    pub lstm_epochs: Option<u64>,
    pub tune: Option<bool>,
    pub warm_start: Option<bool>,
    pub algorithms: Option<Vec<String>>,
    pub min_sharpe_margin: Option<f64>,
    pub max_drawdown: Option<f64>,
    pub min_trades: Option<u64>,
    pub confidence: Option<f64>,
    pub folds: Option<u64>,
    pub max_buy_hold_shortfall: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNotify {
    pub webhook_url: Option<String>,
    pub telegram_chat_id: Option<String>,
    pub telegram_api: Option<String>,
    pub discord: Option<bool>,
    pub feed_down_mins: Option<u64>,
    pub daily_summary: Option<bool>,
    pub timeout_secs: Option<u64>,
    pub retries: Option<u32>,
    pub telegram_commands: Option<bool>,
    pub telegram_allowed_chats: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWeb {
    pub enabled: Option<bool>,
    pub listen: Option<String>,
    pub token_file: Option<String>,
    pub allow_remote: Option<bool>,
    pub max_connections: Option<u64>,
    pub header_timeout_secs: Option<u64>,
}
