//! The engine's models: the champions the configured strategy trades with, loaded at start, and a new
//! champion swapped in between two bars after a promotion (one that does not load leaves the running one).

use crate::config::Config;
use crate::engine::{LoadedModel, LstmProbs, Models, ProbSource};
use crate::models::{ModelKind, Registry};
use crate::policy::{LstmPolicy, ModelSel, Pipeline, PpoPolicy, SessionOptions};
use anyhow::Context;

/// The champions the configured strategy trades with: the PPO policy (`ppo`, `ensemble`) and the LSTM
/// probability source (`lstm`, `ensemble`), each checked against the running pipeline. A kind without a
/// champion is `None`, with a warning: the engine then trades nothing until a retrain promotes one. A
/// champion that does not fit the config is an error naming why.
pub(crate) fn load_models(config: &Config, registry: &Registry) -> anyhow::Result<Models> {
    let symbols = &config.market.symbols;
    let mode = config.strategy.mode;
    let pipeline = Pipeline::new(&config.features, symbols, config.market.timeframe).with_action(config.env.action);
    let wanted = |kind: ModelKind| -> anyhow::Result<bool> {
        if !mode.uses(kind) {
            return Ok(false);
        }
        if registry.champion(kind).context("reading the model registry")?.is_none() {
            log::warn!(
                "no {} champion fits this config: the engine trades nothing until a retrain promotes one ({}; `tradebot retrain --config {}` trains one now; `tradebot models seed --from DIR` imports shipped models)",
                kind.as_str(),
                next_retrain(config),
                config.source.display()
            );
            return Ok(false);
        }
        Ok(true)
    };
    let policy = if wanted(ModelKind::Ppo)? {
        Some(PpoPolicy::load(registry, &ModelSel::Champion, &pipeline, SessionOptions::default()).context(
            "loading the PPO champion (`tradebot models list` shows the registry; `tradebot models promote ID` crowns another; `tradebot retrain --config FILE` trains one for this config)",
        )?)
    } else {
        None
    };
    let probs: Option<Box<dyn ProbSource>> = if wanted(ModelKind::Lstm)? {
        Some(Box::new(
            LstmProbs::load(
                registry,
                &ModelSel::Champion,
                &config.features,
                config.lstm.window_spec(),
                symbols,
                config.market.timeframe,
            )
            .context("loading the LSTM champion")?,
        ))
    } else {
        None
    };
    Ok((policy, probs))
}

/// When the schedule runs the next retrain, in words: from the clock now, or from a replay's first day.
fn next_retrain(config: &Config) -> String {
    if !config.retrain.enabled {
        return "scheduled retrains are off (retrain.enabled = false)".into();
    }
    // A replay's schedule runs on its simulated clock, from its first day.
    let now = match (config.feed.kind, config.feed.from) {
        (crate::config::FeedKind::Replay, Some(from)) => from.and_time(chrono::NaiveTime::MIN).and_utc(),
        _ => crate::clock::now(),
    };
    match config.retrain.schedule.next_after(now) {
        Some(t) => format!("the next scheduled retrain is at {t}"),
        None => "the retrain schedule never fires".into(),
    }
}

/// Loads a new champion for the engine: `None` when the strategy does not trade with its kind, or when it
/// does not load (logged; the running model keeps trading). Slow (an ONNX session): the live daemon runs it
/// off the trading thread, which gets the model as `Update::Model` between two bars.
pub(crate) fn load_swap(config: &Config, registry: &Registry, kind: ModelKind, id: &str) -> Option<LoadedModel> {
    let sel = ModelSel::Id(id.to_string());
    let pipeline =
        Pipeline::new(&config.features, &config.market.symbols, config.market.timeframe).with_action(config.env.action);
    let mode = config.strategy.mode;
    if !mode.uses(kind) {
        log::info!("engine: the {} champion is now {id} (not used by strategy {mode})", kind.as_str());
        return None;
    }
    let loaded = match kind {
        ModelKind::Ppo => PpoPolicy::load(registry, &sel, &pipeline, SessionOptions::default()).map(LoadedModel::Ppo),
        ModelKind::Lstm => {
            // The model's own windows (training may size them below [lstm]'s to its data).
            crate::policy::fetch(registry, &sel, kind).and_then(|(m, bytes)| {
                let window = crate::engine::lstm_source::model_window(&m, config.lstm.window_spec());
                let shapes = crate::engine::lstm_source::shapes(&config.features, &window);
                LstmPolicy::from_parts(m, &bytes, &pipeline, shapes, SessionOptions::default()).map(|policy| {
                    LoadedModel::Lstm { policy: Box::new(policy), features: config.features.clone(), window }
                })
            })
        }
    };
    match loaded {
        Ok(m) => Some(m),
        Err(e) => {
            log::error!(
                "engine: the new {} champion {id} does not load ({e}); the previous model keeps trading",
                kind.as_str()
            );
            None
        }
    }
}
