//! The model manifest: what a model is, what it expects and where it came from. The daemon refuses a
//! model whose manifest does not match its feature pipeline (`Manifest::check_inputs`).

use crate::domain::{Symbol, Timeframe};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which of the engine's two model slots a model fills; the registry keeps one champion per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// The portfolio policy (trained by PPO or SAC): target weights per symbol.
    Ppo,
    /// The LSTM direction classifier: which way each symbol moves over its horizon.
    Lstm,
}

impl ModelKind {
    /// `ppo` or `lstm`: the manifest's, the command line's and the model id's prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Ppo => "ppo",
            ModelKind::Lstm => "lstm",
        }
    }
}

/// A model kind that is neither `ppo` nor `lstm`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model kind {0:?}: use ppo or lstm")]
pub struct UnknownKind(pub String);

impl std::str::FromStr for ModelKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, UnknownKind> {
        match s {
            "ppo" => Ok(ModelKind::Ppo),
            "lstm" => Ok(ModelKind::Lstm),
            _ => Err(UnknownKind(s.to_string())),
        }
    }
}

/// The algorithm that trained a policy (`ModelKind::Ppo`, the engine's policy slot: both serve through
/// the same ONNX contract): in the manifest, in `retrain.algorithms`, in the id's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// Proximal policy optimisation (`tradebot train ppo`).
    #[default]
    Ppo,
    /// Soft actor-critic (`tradebot train sac`).
    Sac,
}

impl Algorithm {
    /// Every algorithm; a tuning search codes one by its place here (0 ppo, 1 sac).
    pub const ALL: [Algorithm; 2] = [Algorithm::Ppo, Algorithm::Sac];

    /// `ppo` or `sac`, as the manifest, the config and the command line spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Ppo => "ppo",
            Algorithm::Sac => "sac",
        }
    }

    /// The algorithm of the name the config and the command line use (`ppo`, `sac`).
    pub fn parse(s: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a model version stands in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelState {
    /// Registered and not (yet) promoted: trained, waiting for or refused by the gate.
    Candidate,
    /// The version the engine trades with; at most one per kind.
    Champion,
    /// A former champion, replaced by a promotion; kept so a rollback can bring it back.
    Retired,
}

impl ModelState {
    /// `candidate`, `champion` or `retired`, as the manifest and the status report name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelState::Candidate => "candidate",
            ModelState::Champion => "champion",
            ModelState::Retired => "retired",
        }
    }
}

/// A named tensor and its shape; `-1` is the batch dimension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// The tensor's name in the ONNX graph (`obs`, `fast`, `probs`, ...).
    pub name: String,
    /// Its dimensions, outermost first; `-1` where the batch size goes.
    pub shape: Vec<i64>,
}

/// The feature pipeline a model was trained on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRef {
    /// The pipeline's `FEATURE_VERSION` at training time; a model of another version is refused.
    pub version: u32,
    /// The features' names in the order the model reads them.
    pub names: Vec<String>,
}

/// `manifest.json` beside a registered `model.onnx`: what the model is, what it reads and writes, what it
/// trades, what data trained it and how it scored. Unknown fields are refused, so a typo is not ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `{kind}-{first 16 hex digits of the ONNX file's SHA-256}`.
    pub id: String,
    /// The slot the model fills (policy or classifier).
    pub kind: ModelKind,
    /// What trained a policy (PPO or SAC; absent from older manifests, which are PPO's). The LSTM's is PPO's
    /// default and not written.
    #[serde(default, skip_serializing_if = "is_ppo")]
    pub algorithm: Algorithm,
    /// When the model was trained (the draft was made), in UTC.
    pub created_at: DateTime<Utc>,
    /// The feature pipeline it was trained on.
    pub features: FeatureRef,
    /// The ONNX graph's inputs; `check_inputs` compares them with what the pipeline feeds.
    pub inputs: Vec<TensorSpec>,
    /// The ONNX graph's outputs.
    pub outputs: Vec<TensorSpec>,
    /// The symbols it trades, in the order of its inputs and outputs; must equal the config's.
    pub symbols: Vec<Symbol>,
    /// The bar length it was trained on; must equal `market.timeframe`.
    pub timeframe: Timeframe,
    /// First day of the training data (inclusive, exchange date); `None` when not recorded.
    pub train_from: Option<NaiveDate>,
    /// Last day of the training data (inclusive); `None` when not recorded.
    pub train_to: Option<NaiveDate>,
    /// First day of the held-out data the model never trained on; `None` without a holdout.
    pub holdout_from: Option<NaiveDate>,
    /// Last day of the held-out data (inclusive); `None` without a holdout or when open-ended.
    pub holdout_to: Option<NaiveDate>,
    /// Training's figures by name (losses, validation scores, `samples_per_sec`, ...), for reports.
    #[serde(default, serialize_with = "crate::domain::number::whole_as_int")]
    pub metrics: BTreeMap<String, f64>,
    /// What the live path needs to build the model's inputs exactly as training did, by kind. PPO: the
    /// env's `initial_cash` and `max_trade` (observation scale, action size); LSTM: window lengths, the
    /// slow timeframe's factor, horizon and label thresholds.
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// The id of the champion this model was warm-started from; `None` when trained from scratch.
    pub parent: Option<String>,
    /// Candidate, champion or retired.
    pub state: ModelState,
    /// SHA-256 of `model.onnx`, checked at every load.
    pub onnx_sha256: String,
}

/// Why a model does not fit the running pipeline and config (`Manifest::check_inputs`); the daemon refuses
/// to load it. Every variant holds the model's `id`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MismatchError {
    /// The model was trained on another feature version.
    #[error(
        "model {id} was trained on feature version {model}, the pipeline runs version {pipeline}: retrain it or run the matching tradebot"
    )]
    FeatureVersion {
        /// The model's id.
        id: String,
        /// The feature version in its manifest.
        model: u32,
        /// The version this build computes.
        pipeline: u32,
    },
    /// Same version, but other feature names or another order.
    #[error("model {id} expects features {model:?}, the pipeline produces {pipeline:?}")]
    FeatureNames {
        /// The model's id.
        id: String,
        /// The names in its manifest.
        model: Vec<String>,
        /// The names the pipeline produces.
        pipeline: Vec<String>,
    },
    /// An input the pipeline feeds has another shape in the model.
    #[error("model {id} expects input {name} of shape {model:?}, the pipeline provides {pipeline:?}")]
    Shape {
        /// The model's id.
        id: String,
        /// The input's name.
        name: String,
        /// Its shape in the model's manifest.
        model: Vec<i64>,
        /// The shape the pipeline feeds.
        pipeline: Vec<i64>,
    },
    /// The model lacks an input the pipeline feeds.
    #[error("model {id} has no input named {name}")]
    MissingInput {
        /// The model's id.
        id: String,
        /// The input it lacks.
        name: String,
    },
    /// The model trades other symbols (or the same in another order) than the config.
    #[error("model {id} trades {}, the config trades {}", list(model), list(config))]
    Symbols {
        /// The model's id.
        id: String,
        /// The symbols in its manifest.
        model: Vec<Symbol>,
        /// The config's `market.symbols`.
        config: Vec<Symbol>,
    },
    /// The model was trained on another bar length than the config trades.
    #[error(
        "model {id} was trained on {model} bars, the config trades {config} bars: set market.timeframe = \"{model}\" or train a {config} model (`tradebot train ppo|lstm --config FILE`)"
    )]
    Timeframe {
        /// The model's id.
        id: String,
        /// The timeframe in its manifest.
        model: Timeframe,
        /// The config's `market.timeframe`.
        config: Timeframe,
    },
}

fn is_ppo(a: &Algorithm) -> bool {
    *a == Algorithm::Ppo
}

/// Symbols as people write them: `AAPL, MSFT`.
fn list(symbols: &[Symbol]) -> String {
    symbols.iter().map(Symbol::as_str).collect::<Vec<_>>().join(", ")
}

impl Manifest {
    /// A candidate's manifest before registration (the registry fills `id` and `onnx_sha256`): what it
    /// is, what it reads and writes, what it trades; no training dates, metrics, parameters or parent.
    pub fn draft(
        kind: ModelKind,
        features: FeatureRef,
        inputs: Vec<TensorSpec>,
        outputs: Vec<TensorSpec>,
        symbols: Vec<Symbol>,
        timeframe: Timeframe,
    ) -> Manifest {
        Manifest {
            id: String::new(),
            kind,
            algorithm: Algorithm::Ppo,
            created_at: crate::clock::now(),
            features,
            inputs,
            outputs,
            symbols,
            timeframe,
            train_from: None,
            train_to: None,
            holdout_from: None,
            holdout_to: None,
            metrics: BTreeMap::new(),
            params: BTreeMap::new(),
            parent: None,
            state: ModelState::Candidate,
            onnx_sha256: String::new(),
        }
    }

    /// Refuses a model that does not fit the running pipeline: feature version and names, every input
    /// the pipeline will feed (name and shape), the traded symbols and the bars' timeframe (a daily
    /// policy fed minute bars would trade every minute).
    pub fn check_inputs(
        &self,
        features: &FeatureRef,
        inputs: &[TensorSpec],
        symbols: &[Symbol],
        timeframe: Timeframe,
    ) -> Result<(), MismatchError> {
        let id = self.id.clone();
        if self.features.version != features.version {
            return Err(MismatchError::FeatureVersion { id, model: self.features.version, pipeline: features.version });
        }
        if self.features.names != features.names {
            return Err(MismatchError::FeatureNames {
                id,
                model: self.features.names.clone(),
                pipeline: features.names.clone(),
            });
        }
        for want in inputs {
            let Some(have) = self.inputs.iter().find(|i| i.name == want.name) else {
                return Err(MismatchError::MissingInput { id, name: want.name.clone() });
            };
            if have.shape != want.shape {
                return Err(MismatchError::Shape {
                    id,
                    name: want.name.clone(),
                    model: have.shape.clone(),
                    pipeline: want.shape.clone(),
                });
            }
        }
        if self.symbols != symbols {
            return Err(MismatchError::Symbols { id, model: self.symbols.clone(), config: symbols.to_vec() });
        }
        if self.timeframe != timeframe {
            return Err(MismatchError::Timeframe { id, model: self.timeframe, config: timeframe });
        }
        Ok(())
    }
}
