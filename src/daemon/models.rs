//! The engine's models: the champions the configured strategy trades with, loaded at start, and a new
//! champion swapped in between two bars after a promotion (one that does not load leaves the running one).

use crate::config::Config;
use crate::engine::{Engine, LstmProbs, ProbSource, StrategyMode};
use crate::models::{ModelKind, Registry};
use crate::policy::{LstmPolicy, ModelSel, Pipeline, PpoPolicy, SessionOptions};
use anyhow::Context;

/// A PPO policy and an LSTM probability source, as a strategy needs them.
pub type Models = (Option<PpoPolicy>, Option<Box<dyn ProbSource>>);

/// The champions the configured strategy trades with: the PPO policy (`ppo`, `ensemble`) and the LSTM
/// probability source (`lstm`, `ensemble`), each checked against the running pipeline.
pub fn load_models(config: &Config, registry: &Registry) -> anyhow::Result<Models> {
    let symbols = &config.market.symbols;
    let mode = config.strategy.mode;
    let pipeline = Pipeline::new(&config.features, symbols, config.market.timeframe);
    let policy = match mode {
        StrategyMode::Ppo | StrategyMode::Ensemble => {
            Some(PpoPolicy::load(registry, &ModelSel::Champion, &pipeline, SessionOptions::default()).context(
                "loading the PPO champion (`tradebot models list` shows the registry; `tradebot models seed --from DIR` imports shipped models; `tradebot retrain --config FILE` trains one for this config)",
            )?)
        }
        StrategyMode::Lstm | StrategyMode::Scripted => None,
    };
    let probs: Option<Box<dyn ProbSource>> = match mode {
        StrategyMode::Lstm | StrategyMode::Ensemble => Some(Box::new(
            LstmProbs::load(
                registry,
                &ModelSel::Champion,
                &config.features,
                config.lstm.window_spec(),
                symbols,
                config.market.timeframe,
            )
            .context("loading the LSTM champion")?,
        )),
        StrategyMode::Ppo | StrategyMode::Scripted => None,
    };
    Ok((policy, probs))
}

/// Loads the new champion and swaps it in; a model that does not load is logged and the running one kept.
pub(super) fn swap_in(config: &Config, registry: &Registry, engine: &mut Engine, kind: ModelKind, id: &str) {
    let sel = ModelSel::Id(id.to_string());
    let pipeline = Pipeline::new(&config.features, &config.market.symbols, config.market.timeframe);
    match kind {
        ModelKind::Ppo if engine.policy_id().is_some() => {
            match PpoPolicy::load(registry, &sel, &pipeline, SessionOptions::default()) {
                Ok(p) => engine.set_policy(p),
                Err(e) => log::error!(
                    "engine: the new PPO champion {id} does not load ({e}); the previous model keeps trading"
                ),
            }
        }
        ModelKind::Lstm if engine.probs_id().is_some() => {
            let shapes = crate::engine::lstm_source::shapes(&config.features, &config.lstm.window_spec());
            match LstmPolicy::load(registry, &sel, &pipeline, shapes, SessionOptions::default()) {
                Ok(p) => {
                    if let Some(src) = engine.probs_mut() {
                        log::info!("engine: LSTM model {} → {id}", src.model_id());
                        src.set_lstm(p);
                    }
                }
                Err(e) => log::error!(
                    "engine: the new LSTM champion {id} does not load ({e}); the previous model keeps trading"
                ),
            }
        }
        _ => log::info!(
            "engine: the {} champion is now {id} (not used by strategy {:?})",
            kind.as_str(),
            config.strategy.mode
        ),
    }
}
