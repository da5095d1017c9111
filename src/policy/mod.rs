//! Policies: ONNX Runtime sessions for the models the engine trades with, loaded from the registry.
//!
//! ```text
//!  Registry ─► (Manifest, model.onnx, SHA-256 checked) ─► check against the running Pipeline
//!            ─► ort Session (one intra-op thread by default) ─► warm-up inference ─► PpoPolicy | LstmPolicy
//! ```
//!
//! - A model is picked by id or as the champion of its kind (`ModelSel`).
//! - Its manifest must match the pipeline that will feed it (feature version and names, input names and
//!   shapes, symbols, and for PPO the action space, `params.env.action`) and the ONNX graph must really have the manifest's inputs and outputs; otherwise the
//!   load is refused with a `PolicyError` that names the model and the difference.
//! - `swap` loads a new model and replaces the running one only when the whole load succeeded, so a bad
//!   model never stops trading with the previous one.
//! - `PpoPolicy::act(obs) -> actions` (the PPO model contract: `obs [-1, obs_dim] -> action [-1, A]`);
//!   `LstmPolicy::probs(x_fast, x_slow, x_context) -> [P(down), P(flat), P(up)]` (the LSTM contract).
//!
//! Inference is synchronous: the engine calls it on its own thread, never on the async reactor.

mod lstm;
mod ppo;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use lstm::{LstmPolicy, LstmShapes};
pub use ppo::PpoPolicy;
pub(crate) use ppo::check_action_space;
#[cfg(test)]
pub(crate) use ppo::manifest_action_space;

use crate::domain::{Symbol, Timeframe};
use crate::exec::ActionSpace;
use crate::features::{FEATURE_VERSION, FeatureSpec};
use crate::models::{FeatureRef, Manifest, MismatchError, ModelKind, Registry, RegistryError};
use ort::session::Session;

/// Why a policy could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(
        "no {kind} champion in the registry: train one (`tradebot train {kind}`) or promote one (`tradebot models promote ID`)"
    )]
    NoChampion { kind: &'static str },
    #[error(
        "no {kind} model in the registry (`--model latest` is the {kind} model trained last): train one (`tradebot train {kind}`)"
    )]
    NoModel { kind: &'static str },
    #[error("model {id} is a {found} model, a {want} model was asked for")]
    WrongKind { id: String, found: &'static str, want: &'static str },
    /// The mismatch names the model and the fix; it is the message itself (not a source, said once).
    #[error("{mismatch}")]
    Mismatch { id: String, mismatch: MismatchError },
    #[error("model {id} refused: {reason}")]
    Contract { id: String, reason: String },
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
    #[error("model {id}: cannot build an ONNX Runtime session: {reason}")]
    Session { id: String, reason: String },
    #[error("model {id}: inference failed: {reason}")]
    Inference { id: String, reason: String },
    #[error("model {id}: input {name} has {got} values, expected {want}")]
    InputLen { id: String, name: &'static str, got: usize, want: usize },
    #[error("model {id}: output is not finite: {output:?}")]
    NotFinite { id: String, output: Vec<f32> },
}

/// Which model to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSel {
    /// The champion of the policy's kind.
    Champion,
    /// The model trained last (the newest in the registry), champion or not.
    Latest,
    Id(String),
}

/// `champion`, `latest`, or the id.
impl std::fmt::Display for ModelSel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSel::Champion => f.write_str("champion"),
            ModelSel::Latest => f.write_str("latest"),
            ModelSel::Id(id) => f.write_str(id),
        }
    }
}

impl ModelSel {
    /// `champion` (or nothing) → the champion; `latest` → the model trained last; anything else is an id.
    pub fn parse(s: Option<&str>) -> ModelSel {
        match s {
            None | Some("champion") => ModelSel::Champion,
            Some("latest") => ModelSel::Latest,
            Some(id) => ModelSel::Id(id.to_string()),
        }
    }
}

/// What the running pipeline feeds a model: the feature set and the traded symbols, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// The feature set's version and column names, in the order the model reads them.
    pub features: FeatureRef,
    /// The traded symbols, in the order of the model's inputs and outputs.
    pub symbols: Vec<Symbol>,
    /// The bars the model will be fed (`market.timeframe`): a model trained on other bars is refused.
    pub timeframe: Timeframe,
    /// The PPO action space the engine trades (`env.action_space`): a PPO model trained in another is
    /// refused.
    pub action: ActionSpace,
}

impl Pipeline {
    /// The pipeline of `spec` over `symbols` at `timeframe`, trading share counts (see `with_action`).
    pub fn new(spec: &FeatureSpec, symbols: &[Symbol], timeframe: Timeframe) -> Pipeline {
        Pipeline {
            features: FeatureRef { version: FEATURE_VERSION, names: spec.names() },
            symbols: symbols.to_vec(),
            timeframe,
            action: ActionSpace::Shares,
        }
    }

    /// The pipeline trading PPO actions in `action` (the config's `env.action_space`).
    pub fn with_action(mut self, action: ActionSpace) -> Pipeline {
        self.action = action;
        self
    }

    /// The number of feature columns per symbol.
    pub fn n_features(&self) -> usize {
        self.features.names.len()
    }
}

/// Session settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    pub intra_threads: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions { intra_threads: 1 }
    }
}

/// The manifest and bytes of the selected model, of the wanted kind.
pub(crate) fn fetch(registry: &Registry, sel: &ModelSel, kind: ModelKind) -> Result<(Manifest, Vec<u8>), PolicyError> {
    let id = match sel {
        ModelSel::Id(id) => id.clone(),
        ModelSel::Champion => registry.champion(kind)?.ok_or(PolicyError::NoChampion { kind: kind.as_str() })?.id,
        ModelSel::Latest => registry.latest(Some(kind))?.ok_or(PolicyError::NoModel { kind: kind.as_str() })?.id,
    };
    let (m, bytes) = registry.load(&id)?;
    if m.kind != kind {
        return Err(PolicyError::WrongKind { id, found: m.kind.as_str(), want: kind.as_str() });
    }
    Ok((m, bytes))
}

/// A session over `bytes` whose graph has exactly the manifest's input and output names.
pub(crate) fn session(m: &Manifest, bytes: &[u8], opts: SessionOptions) -> Result<Session, PolicyError> {
    let rt = crate::runtime_libs::init_onnxruntime(None).map_err(|e| PolicyError::Runtime(e.to_string()))?;
    let fail = |e: String| PolicyError::Session { id: m.id.clone(), reason: e };
    let s = Session::builder(&rt.env)
        .map_err(|e| fail(e.to_string()))?
        .with_intra_threads(opts.intra_threads.max(1))
        .map_err(|e| fail(e.to_string()))?
        .commit_from_memory(bytes)
        .map_err(|e| fail(e.to_string()))?;
    let names = |o: &[ort::value::Outlet]| o.iter().map(|x| x.name().to_string()).collect::<Vec<_>>();
    let want_in: Vec<String> = m.inputs.iter().map(|t| t.name.clone()).collect();
    let want_out: Vec<String> = m.outputs.iter().map(|t| t.name.clone()).collect();
    let (have_in, have_out) = (names(s.inputs()), names(s.outputs()));
    if sorted(&have_in) != sorted(&want_in) || sorted(&have_out) != sorted(&want_out) {
        return Err(PolicyError::Contract {
            id: m.id.clone(),
            reason: format!(
                "the ONNX graph has inputs {have_in:?} and outputs {have_out:?}, the manifest says {want_in:?} and {want_out:?}"
            ),
        });
    }
    Ok(s)
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}
