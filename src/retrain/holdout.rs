//! The holdout evaluator that `tradebot retrain` and the daemon use: the seam where the engine's backtest
//! plugs in (`holdout_evaluator` returns it). Until it does, `NoBacktest` refuses to evaluate, so a
//! retrain that produced a candidate is recorded as failed at the evaluation stage and never promoted.

use super::gate::GateInput;
use super::pipeline::{EvalError, Evaluator};
use crate::config::Config;
use crate::store::Store;
use std::sync::Arc;

/// No holdout backtest in this build.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoBacktest;

impl Evaluator for NoBacktest {
    fn evaluate(&self, model_id: &str) -> Result<GateInput, EvalError> {
        Err(EvalError(format!(
            "cannot backtest {model_id} on the holdout: this build has no backtest behind retrain::Evaluator"
        )))
    }
}

/// The evaluator for a config and its store (the engine's backtest over `[train]`'s holdout).
pub fn holdout_evaluator(_config: &Config, _store: &Store) -> Arc<dyn Evaluator> {
    Arc::new(NoBacktest)
}
