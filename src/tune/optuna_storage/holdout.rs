//! The promotion gate on a completed trial, written in the trial's user attributes before it completes
//! (a finished trial takes no attributes): the holdout's figures (`holdout_sharpe`, `holdout_return`,
//! `holdout_max_drawdown`, `holdout_trades`, `holdout_buy_hold_return`) and the gate's decision against
//! this machine's champion (`gate`: `{"promote", "reason", "champion"}`), as `tradebot retrain` would
//! decide it. The trial's model is judged from a private registry (nothing is registered for a trial that
//! may not be the best); the champion is backtested once per worker.

use super::super::trial::{Shared, Trial};
use crate::config::Config;
use crate::models::{ModelKind, Registry};
use crate::retrain::gate::{self, GateDecision, GateInput};
use crate::retrain::holdout::BacktestEvaluator;
use crate::retrain::pipeline::Evaluator;
use crate::training::device::Ran;
use anyhow::Context;
use serde_json::{Value, json};

/// Judges completed trials on the holdout of `[train]`.
pub(super) struct HoldoutGate {
    config: Config,
    /// The trials' models, each judged from here; removed with the worker.
    models: tempfile::TempDir,
    /// This machine's PPO champion and its holdout figures, where there is one.
    champion: Option<(String, GateInput)>,
}

/// Why no gate runs for a config: no holdout to judge on.
pub(super) fn no_holdout(config: &Config) -> Option<String> {
    let t = &config.train;
    (t.holdout_from.is_none() || t.holdout_to.is_none()).then(|| {
        format!(
            "{}: [train] has no holdout (holdout_from and holdout_to, or window_days and holdout_days): completed trials get no gate decision",
            config.source.display()
        )
    })
}

impl HoldoutGate {
    /// The gate for `config` (its `[train]` dates resolved): the champion backtested on the holdout now.
    pub(super) fn open(config: &Config) -> anyhow::Result<HoldoutGate> {
        let registry = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
        let champion = match registry.champion(ModelKind::Ppo)? {
            None => None,
            Some(m) => {
                let ev = BacktestEvaluator::new(config.clone(), store(config)?);
                let figures = ev.evaluate(&m.id).map_err(|e| anyhow::anyhow!("the champion: {e}"))?;
                Some((m.id, figures))
            }
        };
        let models = tempfile::tempdir().context("a private directory for the trials' models")?;
        Ok(HoldoutGate { config: config.clone(), models, champion })
    }

    /// The holdout's figures of trial `t`'s model and the gate's decision on them.
    pub(super) fn judge(&self, t: &Trial, shared: &Shared, ran: &Ran) -> anyhow::Result<(GateInput, GateDecision)> {
        let mut c = t.config.clone();
        c.state_dir = self.models.path().to_path_buf();
        let m = t.register(&c, shared, ran)?;
        // The bars from this machine's store, the model from the private registry.
        let ev = BacktestEvaluator::new(c, store(&self.config)?);
        ev.check(&m.id).map_err(|e| anyhow::anyhow!("{e}"))?;
        let figures = ev.evaluate(&m.id).map_err(|e| anyhow::anyhow!("{e}"))?;
        let decision = gate::decide(&figures, self.champion.as_ref().map(|(_, f)| f), &self.config.retrain.gate);
        Ok((figures, decision))
    }

    /// The user attributes of a judged trial.
    pub(super) fn attrs(&self, figures: &GateInput, decision: &GateDecision) -> Vec<(&'static str, Value)> {
        attrs(figures, decision, self.champion.as_ref().map(|(id, _)| id.as_str()))
    }
}

fn attrs(figures: &GateInput, decision: &GateDecision, champion: Option<&str>) -> Vec<(&'static str, Value)> {
    let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    vec![
        ("holdout_sharpe", finite(figures.sharpe)),
        ("holdout_return", finite(figures.total_return)),
        ("holdout_max_drawdown", finite(figures.max_drawdown)),
        ("holdout_trades", json!(figures.trades)),
        ("holdout_buy_hold_return", finite(figures.buy_hold_return)),
        ("gate", json!({ "promote": decision.promote, "reason": decision.reason, "champion": champion })),
    ]
}

/// The store of `config` with its bars (beside a running daemon, its snapshot), opened for one judgement:
/// another worker on the same state directory may need it between trials.
fn store(config: &Config) -> anyhow::Result<crate::store::Store> {
    let store = crate::control::beside::open_or_snapshot(&config.state_dir)?;
    crate::data::ensure_bars(config, &store)?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_written_as_optuna_user_attributes_with_no_nan() {
        let figures = GateInput {
            sharpe: f64::NAN,
            max_drawdown: 0.1,
            trades: 12,
            total_return: 0.05,
            buy_hold_return: 0.07,
            buy_hold_sharpe: 0.9,
            returns: vec![],
            buy_hold_returns: vec![],
        };
        let d = GateDecision { promote: false, reason: "trails buy-and-hold".into(), numbers: Default::default() };
        let a: std::collections::BTreeMap<_, _> = attrs(&figures, &d, Some("ppo-7")).into_iter().collect();
        assert_eq!(a["holdout_sharpe"], Value::Null, "NaN is not JSON: Optuna could not read it");
        assert_eq!((a["holdout_return"].as_f64(), a["holdout_trades"].as_u64()), (Some(0.05), Some(12)));
        assert_eq!(a["gate"], json!({"promote": false, "reason": "trails buy-and-hold", "champion": "ppo-7"}));
    }
}
