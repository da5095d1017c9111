//! The holdout evaluator that `tradebot retrain` and the daemon use: the engine's backtest
//! (`backtest::run_kind`) over `[train] holdout_from ..= holdout_to`, the same for candidate and champion.
//! `check` loads the candidate as the engine would (manifest against the running pipeline, ONNX Runtime
//! session, warm-up inference with finite outputs); the tch-against-ONNX parity itself is checked by the
//! trainer before it registers anything.

use super::gate::GateInput;
use super::pipeline::{EvalError, Evaluator};
use crate::backtest;
use crate::config::Config;
use crate::data::daily_bar_time;
use crate::models::{ModelKind, Registry};
use crate::policy::ModelSel;
use crate::store::Store;
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;

/// Backtests on the configured holdout.
pub struct BacktestEvaluator {
    config: Config,
    store: Store,
}

impl BacktestEvaluator {
    /// An evaluator over `config`'s holdout, reading the bars from `store`.
    pub fn new(config: Config, store: Store) -> Self {
        BacktestEvaluator { config, store }
    }

    fn window(&self, as_of: DateTime<Utc>) -> Result<(DateTime<Utc>, DateTime<Utc>), EvalError> {
        let t = &self.config.train.resolve(as_of.date_naive());
        match (t.holdout_from, t.holdout_to) {
            (Some(f), Some(to)) => {
                Ok((daily_bar_time(f), daily_bar_time(to) + Duration::days(1) - Duration::microseconds(1)))
            }
            _ => Err(EvalError(format!(
                "{}: [train] holdout_from and holdout_to (or window_days and holdout_days) are needed to evaluate a candidate; set them (a range after the training data)",
                self.config.source.display()
            ))),
        }
    }

    fn kind(&self, registry: &Registry, model_id: &str) -> Result<ModelKind, EvalError> {
        let (m, _) = registry.load(model_id).map_err(|e| EvalError(e.to_string()))?;
        Ok(m.kind)
    }

    fn registry(&self) -> Result<Registry, EvalError> {
        Registry::open(&self.config.state_dir.join("models")).map_err(|e| EvalError(e.to_string()))
    }
}

impl Evaluator for BacktestEvaluator {
    fn check(&self, model_id: &str) -> Result<(), EvalError> {
        let reg = self.registry()?;
        let sel = ModelSel::Id(model_id.to_string());
        let c = &self.config;
        let pipeline =
            crate::policy::Pipeline::new(&c.features, &c.market.symbols, c.market.timeframe).with_action(c.env.action);
        let opts = crate::policy::SessionOptions::default();
        let loaded = match self.kind(&reg, model_id)? {
            ModelKind::Ppo => crate::policy::PpoPolicy::load(&reg, &sel, &pipeline, opts).map(|_| ()),
            ModelKind::Lstm => crate::engine::LstmProbs::load(
                &reg,
                &sel,
                &c.features,
                c.lstm.window_spec(),
                &c.market.symbols,
                c.market.timeframe,
            )
            .map(|_| ()),
        };
        loaded.map_err(|e| EvalError(format!("the candidate does not load as the engine would: {e}")))
    }

    fn evaluate(&self, model_id: &str) -> Result<GateInput, EvalError> {
        self.evaluate_at(model_id, crate::clock::now())
    }

    fn evaluate_at(&self, model_id: &str, as_of: DateTime<Utc>) -> Result<GateInput, EvalError> {
        let (from, to) = self.window(as_of)?;
        let reg = self.registry()?;
        let kind = self.kind(&reg, model_id)?;
        let sel = ModelSel::Id(model_id.to_string());
        // The gate's backtests say their refusals at DEBUG: the day's INFO lines are the trading engine's.
        let r = crate::engine::refusals::at_debug(|| {
            backtest::run_kind(&self.config, &self.store, &reg, kind, &sel, from, to)
        })
        .map_err(|e| EvalError(format!("holdout backtest of {model_id}: {e}")))?;
        let returns = |v: Vec<f64>| v.windows(2).map(|w| if w[0] > 0.0 { w[1] / w[0] - 1.0 } else { 0.0 }).collect();
        Ok(GateInput {
            sharpe: r.strategy.sharpe,
            max_drawdown: r.strategy.max_drawdown,
            trades: r.strategy.trades as u64,
            total_return: r.strategy.total_return,
            buy_hold_return: r.buy_hold.total_return,
            buy_hold_sharpe: r.buy_hold.sharpe,
            returns: returns(r.curve.iter().map(|p| p.equity).collect()),
            buy_hold_returns: returns(r.curve.iter().map(|p| p.buy_hold).collect()),
        })
    }
}

/// The evaluator for a config and its store (the engine's backtest over `[train]`'s holdout).
pub fn holdout_evaluator(config: &Config, store: &Store) -> Arc<dyn Evaluator> {
    Arc::new(BacktestEvaluator::new(config.clone(), store.clone()))
}
