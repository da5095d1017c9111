//! Test fixtures for retraining: a store with bars, a registry with models, a fake training child (a
//! `/bin/sh -c` script standing in for `tradebot train`), and a fake evaluator with canned figures.

use super::gate::GateInput;
use super::pipeline::{EvalError, Evaluator};
use super::spec::PipelineSpec;
use crate::config::{GateConfig, RetrainConfig, TrainConfig};
use crate::domain::{Bar, Symbol, Timeframe};
use crate::models::{FeatureRef, Manifest, ModelKind, Registry, TensorSpec};
use crate::schedule::Schedule;
use crate::store::Store;
use chrono::{NaiveDate, TimeZone, Utc};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

pub(crate) fn store_with_bars(dir: &Path) -> Store {
    let store = Store::open(dir).unwrap();
    let s = Symbol::new("AAPL").unwrap();
    let bars: Vec<Bar> = (0..40)
        .map(|i| {
            let t = Utc.with_ymd_and_hms(2010, 11, 1, 21, 0, 0).unwrap() + chrono::Duration::days(i);
            let c = 10.0 + i as f64 * 0.1;
            Bar::new(s.clone(), Timeframe::DAY1, t, c, c + 1.0, c - 1.0, c, 1000.0).unwrap()
        })
        .collect();
    store.put_bars(&bars).unwrap();
    store
}

pub(crate) fn draft(kind: ModelKind) -> Manifest {
    Manifest::draft(
        kind,
        FeatureRef { version: 1, names: vec!["ret_1".into()] },
        vec![TensorSpec { name: "obs".into(), shape: vec![-1, 3] }],
        vec![TensorSpec { name: "action".into(), shape: vec![-1, 1] }],
        vec![Symbol::new("AAPL").unwrap()],
        Timeframe::DAY1,
    )
}

/// A registry under `state/models` with a champion and a candidate of `kind`: (champion id, candidate id).
pub(crate) fn registry_with_champion(state: &Path, kind: ModelKind) -> (String, String) {
    let reg = Registry::open(&state.join("models")).unwrap();
    let champ = reg.add(b"champion bytes", draft(kind)).unwrap();
    reg.promote(&champ.id, "seed").unwrap();
    let cand = reg.add(b"candidate bytes", draft(kind)).unwrap();
    (champ.id, cand.id)
}

pub(crate) fn retrain_config(budget: Duration) -> RetrainConfig {
    RetrainConfig {
        enabled: true,
        schedule: Schedule::parse(Schedule::DEFAULT_SPEC, Schedule::DEFAULT_ZONE).unwrap(),
        time_budget: budget,
        gpu_memory_mb: 0,
        memory_mb: None,
        ppo_steps: Some(1000),
        sac_steps: Some(500),
        lstm_epochs: None,
        tune: false,
        warm_start: true,
        algorithms: vec![crate::models::Algorithm::Ppo],
        gate: GateConfig {
            min_sharpe_margin: 0.1,
            max_drawdown: 0.25,
            min_trades: 5,
            confidence: 0.9,
            folds: 4,
            max_buy_hold_shortfall: 0.05,
            objective: Default::default(),
        },
    }
}

/// A spec whose "tradebot" is `/bin/sh -c script`, called as `script train <kind> --config F --json ...`.
pub(crate) fn spec(state: &Path, script: &str, budget: Duration) -> PipelineSpec {
    PipelineSpec {
        program: "/bin/sh".into(),
        program_args: vec!["-c".into(), script.into(), "fake-tradebot".into()],
        config_file: state.join("tradebot.toml"),
        state_dir: state.to_path_buf(),
        symbols: vec![Symbol::new("AAPL").unwrap()],
        timeframe: Timeframe::DAY1,
        train: TrainConfig {
            rolling: None,
            from: None,
            to: NaiveDate::from_ymd_opt(2010, 11, 30),
            holdout_from: NaiveDate::from_ymd_opt(2010, 12, 1),
            holdout_to: None,
            checkpoint_every: 10,
        },
        retrain: retrain_config(budget),
        lstm_history_days: 3650,
    }
}

/// Canned holdout figures by model id; records every call.
#[derive(Default)]
pub(crate) struct FakeEvaluator {
    pub figures: BTreeMap<String, GateInput>,
    pub calls: Mutex<Vec<String>>,
}

impl FakeEvaluator {
    pub(crate) fn with(figures: &[(&str, f64)]) -> FakeEvaluator {
        let figures = figures
            .iter()
            .map(|(id, sharpe)| {
                // Per-bar returns: the same noise for every model plus a drift that grows with its Sharpe, so
                // a higher Sharpe is a real lead.
                let noise = crate::retrain::noise::tests::normal(7, 120, 0.0, 0.01);
                let returns: Vec<f64> = noise.iter().map(|r| r + 0.001 * sharpe).collect();
                let input = GateInput {
                    sharpe: *sharpe,
                    max_drawdown: 0.1,
                    trades: 20,
                    total_return: 0.05,
                    buy_hold_return: 0.0,
                    buy_hold_sharpe: 0.0,
                    buy_hold_returns: vec![0.0; returns.len()],
                    returns,
                };
                (id.to_string(), input)
            })
            .collect();
        FakeEvaluator { figures, calls: Mutex::default() }
    }
}

impl Evaluator for FakeEvaluator {
    fn evaluate(&self, model_id: &str) -> Result<GateInput, EvalError> {
        self.calls.lock().unwrap().push(model_id.to_string());
        self.figures.get(model_id).cloned().ok_or_else(|| EvalError(format!("no backtest for {model_id}")))
    }
}

/// The shell line printing the child's `done` event for `id`.
pub(crate) fn done_line(id: &str) -> String {
    format!(r#"echo '{{"event":"done","model_id":"{id}","metrics":{{"mean_return":1.5}}}}'"#)
}
