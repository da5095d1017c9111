//! The `[features]` and `[env]` sections: the feature set and the training environment, checked into a
//! `FeatureSpec` and an `EnvConfig`. The env's fee and slippage default to the simulated broker's, so that
//! training and paper trading charge the same unless the file says otherwise.

use super::raw::{RawEnv, RawFeatures};
use super::{BrokerConfig, Checker};
use crate::env::{Accounting, Benchmark, EnvConfig, Reward};
use crate::exec::ActionSpace;
use crate::exec::ExecParams;
use crate::features::FeatureSpec;

fn clamp_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

impl Checker {
    /// The feature set; its own `check` (the one `FeatureSpec` uses everywhere) reports bad values.
    pub(super) fn features(&mut self, r: RawFeatures) -> FeatureSpec {
        let d = FeatureSpec::default();
        let list = |v: Option<Vec<u64>>, default: Vec<usize>| match v {
            Some(l) => l.into_iter().map(clamp_usize).collect(),
            None => default,
        };
        let one = |v: Option<u64>, default: usize| v.map_or(default, clamp_usize);
        let spec = FeatureSpec {
            return_horizons: list(r.return_horizons, d.return_horizons),
            vol_windows: list(r.vol_windows, d.vol_windows),
            sma_windows: list(r.sma_windows, d.sma_windows),
            ema_spans: list(r.ema_spans, d.ema_spans),
            macd_fast: one(r.macd_fast, d.macd_fast),
            macd_slow: one(r.macd_slow, d.macd_slow),
            macd_signal: one(r.macd_signal, d.macd_signal),
            rsi_period: one(r.rsi_period, d.rsi_period),
            cci_period: one(r.cci_period, d.cci_period),
            adx_period: one(r.adx_period, d.adx_period),
            bb_window: one(r.bb_window, d.bb_window),
            bb_k: r.bb_k.unwrap_or(d.bb_k),
            volume_z_window: one(r.volume_z_window, d.volume_z_window),
        };
        for e in spec.check() {
            self.problem(e.to_string());
        }
        spec
    }

    pub(super) fn env(&mut self, r: RawEnv, broker: &BrokerConfig) -> EnvConfig {
        let d = EnvConfig::default();
        let exec = ExecParams {
            max_trade: self.range("env.max_trade", r.max_trade, 100.0, (0.0, false), (1e9, true)),
            min_order: self.range("env.min_order", r.min_order, 1.0, (0.0, false), (1e9, true)),
            fee_bps: self.range("env.fee_bps", r.fee_bps, broker.fee_bps, (0.0, true), (1000.0, true)),
            slippage_bps: self.range(
                "env.slippage_bps",
                r.slippage_bps,
                broker.slippage_bps,
                (0.0, true),
                (1000.0, true),
            ),
            trailing_stop: self.range("env.trailing_stop_pct", r.trailing_stop_pct, 0.0, (0.0, true), (1.0, false)),
            cooldown_bars: self.count("env.cooldown_bars", r.cooldown_bars, 0, 0, 10_000) as u32,
            integer_units: r.integer_units.unwrap_or(true),
            cash_cap_ignores_fees: self.choice(
                "env.buy_cap",
                r.buy_cap.as_deref(),
                "after-fees",
                &[("after-fees", false), ("before-fees", true)],
            ),
        };
        let action = self.action_space(&r);
        let reward = self.reward(&r);
        if action != ActionSpace::Shares && r.accounting.as_deref() == Some("finrl-numpy") {
            self.problem(
                "env.action_space = \"weights\" with env.accounting = \"finrl-numpy\": FinRL's accounting has share counts only; use accounting = \"standard\"".into(),
            );
        }
        EnvConfig {
            action,
            reward,
            n_envs: self.count("env.n_envs", r.n_envs, 64, 1, 1 << 20) as usize,
            episode_len: self.count("env.episode_len", r.episode_len, d.episode_len as u64, 1, 1 << 20) as usize,
            initial_cash: self.range("env.initial_cash", r.initial_cash, d.initial_cash, (0.0, false), (1e12, true)),
            exec,
            reward_scale: self.range("env.reward_scale", r.reward_scale, d.reward_scale, (0.0, false), (1e6, true)),
            turnover_penalty: self.range("env.turnover_penalty", r.turnover_penalty, 0.0, (0.0, true), (1.0, true)),
            turbulence_threshold: r
                .turbulence_threshold
                .map(|t| self.range("env.turbulence_threshold", Some(t), 99.0, (0.0, false), (1e12, true))),
            fixed_start: false,
            seed: r.seed.unwrap_or(0),
            accounting: self.choice(
                "env.accounting",
                r.accounting.as_deref(),
                "standard",
                &[("standard", Accounting::Standard), ("finrl-numpy", Accounting::FinrlNumpy)],
            ),
        }
    }

    /// `env.action_space` (with `no_trade_band` and `max_weight` for weights).
    fn action_space(&mut self, r: &RawEnv) -> ActionSpace {
        let weights = self.choice(
            "env.action_space",
            r.action_space.as_deref(),
            "shares",
            &[("shares", false), ("weights", true)],
        );
        let band = self.range("env.no_trade_band", r.no_trade_band, 0.05, (0.0, true), (1.0, false));
        let max_weight = self.range("env.max_weight", r.max_weight, 1.0, (0.0, false), (1.0, true));
        if !weights && (r.no_trade_band.is_some() || r.max_weight.is_some()) {
            self.problem(
                "env.no_trade_band / env.max_weight apply to env.action_space = \"weights\" only: set it, or remove them".into(),
            );
        }
        if weights { ActionSpace::Weights { band, max_weight } } else { ActionSpace::Shares }
    }

    /// `env.reward` (with `benchmark`, `turnover_bps`, `sharpe_eta`): also what the promotion gate counts
    /// as better (`Reward::objective`).
    fn reward(&mut self, r: &RawEnv) -> Reward {
        #[derive(Clone, Copy)]
        enum K {
            Equity,
            Bench,
            Dsr,
        }
        let kind = self.choice(
            "env.reward",
            r.reward.as_deref(),
            "equity",
            &[("equity", K::Equity), ("vs-benchmark", K::Bench), ("differential-sharpe", K::Dsr)],
        );
        let turnover_bps = self.range("env.turnover_bps", r.turnover_bps, 0.0, (0.0, true), (10_000.0, true));
        let eta = self.range("env.sharpe_eta", r.sharpe_eta, 0.01, (0.0, false), (1.0, false));
        let benchmark = match r.benchmark.as_deref() {
            None | Some("equal-weight") => Benchmark::EqualWeight,
            Some(s) => match crate::domain::Symbol::new(s) {
                Ok(sym) => Benchmark::Symbol(sym.to_string()),
                Err(e) => {
                    self.problem(format!(
                        "env.benchmark = {s:?}: {e}; use \"equal-weight\" or an index symbol such as \"SPY\""
                    ));
                    Benchmark::EqualWeight
                }
            },
        };
        let used = |set: bool, key: &str, kinds: &str, this: &mut Self| {
            if set {
                this.problem(format!("env.{key} applies to env.reward = {kinds} only: set it, or remove env.{key}"));
            }
        };
        match kind {
            K::Equity => {
                used(r.turnover_bps.is_some(), "turnover_bps", "\"vs-benchmark\" or \"differential-sharpe\"", self);
                used(r.benchmark.is_some(), "benchmark", "\"vs-benchmark\"", self);
                used(r.sharpe_eta.is_some(), "sharpe_eta", "\"differential-sharpe\"", self);
                Reward::Equity
            }
            K::Bench => {
                used(r.sharpe_eta.is_some(), "sharpe_eta", "\"differential-sharpe\"", self);
                Reward::VsBenchmark { benchmark, turnover_bps }
            }
            K::Dsr => {
                used(r.benchmark.is_some(), "benchmark", "\"vs-benchmark\"", self);
                Reward::DifferentialSharpe { eta, turnover_bps }
            }
        }
    }
}
