//! The model manifest: what a model is, what it expects and where it came from. The daemon refuses a
//! model whose manifest does not match its feature pipeline (`Manifest::check_inputs`).

use crate::domain::{Symbol, Timeframe};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Ppo,
    Lstm,
}

impl ModelKind {
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
    pub const ALL: [Algorithm; 2] = [Algorithm::Ppo, Algorithm::Sac];

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelState {
    Candidate,
    Champion,
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
    pub name: String,
    pub shape: Vec<i64>,
}

/// The feature pipeline a model was trained on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRef {
    pub version: u32,
    pub names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `{kind}-{first 16 hex digits of the ONNX file's SHA-256}`.
    pub id: String,
    pub kind: ModelKind,
    /// What trained a policy (PPO or SAC; absent from older manifests, which are PPO's). The LSTM's is PPO's
    /// default and not written.
    #[serde(default, skip_serializing_if = "is_ppo")]
    pub algorithm: Algorithm,
    pub created_at: DateTime<Utc>,
    pub features: FeatureRef,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    pub symbols: Vec<Symbol>,
    pub timeframe: Timeframe,
    pub train_from: Option<NaiveDate>,
    pub train_to: Option<NaiveDate>,
    pub holdout_from: Option<NaiveDate>,
    pub holdout_to: Option<NaiveDate>,
    #[serde(default, serialize_with = "crate::domain::number::whole_as_int")]
    pub metrics: BTreeMap<String, f64>,
    /// What the live path needs to build the model's inputs exactly as training did, by kind. PPO: the
    /// env's `initial_cash` and `max_trade` (observation scale, action size); LSTM: window lengths, the
    /// slow timeframe's factor, horizon and label thresholds.
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    pub parent: Option<String>,
    pub state: ModelState,
    /// SHA-256 of `model.onnx`, checked at every load.
    pub onnx_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MismatchError {
    #[error(
        "model {id} was trained on feature version {model}, the pipeline runs version {pipeline}: retrain it or run the matching tradebot"
    )]
    FeatureVersion { id: String, model: u32, pipeline: u32 },
    #[error("model {id} expects features {model:?}, the pipeline produces {pipeline:?}")]
    FeatureNames { id: String, model: Vec<String>, pipeline: Vec<String> },
    #[error("model {id} expects input {name} of shape {model:?}, the pipeline provides {pipeline:?}")]
    Shape { id: String, name: String, model: Vec<i64>, pipeline: Vec<i64> },
    #[error("model {id} has no input named {name}")]
    MissingInput { id: String, name: String },
    #[error("model {id} trades {}, the config trades {}", list(model), list(config))]
    Symbols { id: String, model: Vec<Symbol>, config: Vec<Symbol> },
    #[error(
        "model {id} was trained on {model} bars, the config trades {config} bars: set market.timeframe = \"{model}\" or train a {config} model (`tradebot train ppo|lstm --config FILE`)"
    )]
    Timeframe { id: String, model: Timeframe, config: Timeframe },
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
