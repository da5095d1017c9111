//! `PpoPolicy`: the portfolio policy (`obs [-1, 1 + A(1 + F)] -> action [-1, A]`, mean action in
//! [-1, 1], observation normalisation inside the graph), as the PPO model contract defines it. A SAC
//! policy (`algorithm = sac` in its manifest; its action `tanh(mean)`) keeps the same contract and is
//! served here too.

use super::{ModelSel, Pipeline, PolicyError, SessionOptions, fetch, session};
use crate::exec::ActionSpace;
use crate::exec::ExecParams;
use crate::models::{Manifest, ModelKind, Registry, TensorSpec};
use ort::session::{HasSelectedOutputs, OutputSelector, RunOptions, Session};
use ort::value::Tensor;

pub(super) const OBS_INPUT: &str = "obs";

/// Why a PPO model's action space does not suit the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ActionSpaceError {
    #[error(
        "its manifest's action space {value} is not one this tradebot knows ({reason}): retrain it with this tradebot"
    )]
    Unknown { value: String, reason: String },
    #[error(
        "it was trained in the {model} action space, the config's env.action_space is \"{config}\": set env.action_space = \"{model}\" or retrain the model with this config (`tradebot train ppo`)"
    )]
    Differs { model: &'static str, config: &'static str },
}

/// The action space a PPO model was trained in (`params.env.action`; share counts for a model whose
/// manifest predates the choice), or why it cannot be read.
pub(crate) fn manifest_action_space(m: &Manifest) -> Result<ActionSpace, ActionSpaceError> {
    match m.params.get("env").and_then(|e| e.get("action")) {
        None => Ok(ActionSpace::Shares),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| ActionSpaceError::Unknown { value: v.to_string(), reason: e.to_string() }),
    }
}

/// Refuses a model whose action space differs from the config's `env.action_space`, naming both. The
/// kind must match (what the model's outputs mean); the band and the cap are the config's, applied when
/// trading.
pub(crate) fn check_action_space(m: &Manifest, config: &ActionSpace) -> Result<(), ActionSpaceError> {
    let model = manifest_action_space(m)?;
    if model.name() != config.name() {
        return Err(ActionSpaceError::Differs { model: model.name(), config: config.name() });
    }
    Ok(())
}

pub(super) const ACTION_OUTPUT: &str = "action";

/// A loaded PPO (or SAC) policy: its ONNX Runtime session, checked against the pipeline at load, with
/// its input and output values made once (a call copies the observation in and reads the actions out).
pub struct PpoPolicy {
    manifest: Manifest,
    session: Session,
    /// The observation row `[1, obs_dim]`: one ONNX Runtime value made at load, its data rewritten in
    /// place by each call (no value created per call).
    obs: Tensor<f32>,
    obs_dim: usize,
    /// Runs with the action output `[1, n_assets]` made at load: ONNX Runtime writes each call's actions
    /// into it, so a call allocates no output value and reads no type information back.
    run: RunOptions<HasSelectedOutputs>,
    n_assets: usize,
    /// The config's action space (the model's kind, checked at load; the config's band and cap).
    action: ActionSpace,
}

impl std::fmt::Debug for PpoPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PpoPolicy").field("id", &self.manifest.id).field("obs_dim", &self.obs_dim()).finish()
    }
}

impl PpoPolicy {
    /// The observation width the pipeline feeds: cash, then per symbol (holding value, features).
    pub fn obs_dim_for(pipeline: &Pipeline) -> usize {
        1 + pipeline.symbols.len() * (1 + pipeline.n_features())
    }

    /// Loads the selected PPO model from the registry, checks it and warms it up.
    pub fn load(
        registry: &Registry,
        sel: &ModelSel,
        pipeline: &Pipeline,
        opts: SessionOptions,
    ) -> Result<PpoPolicy, PolicyError> {
        let (m, bytes) = fetch(registry, sel, ModelKind::Ppo)?;
        Self::from_parts(m, &bytes, pipeline, opts)
    }

    /// Checks a manifest and its ONNX bytes against the pipeline, builds the session and runs a warm-up.
    pub fn from_parts(
        m: Manifest,
        bytes: &[u8],
        pipeline: &Pipeline,
        opts: SessionOptions,
    ) -> Result<PpoPolicy, PolicyError> {
        let d = Self::obs_dim_for(pipeline) as i64;
        let a = pipeline.symbols.len();
        let want = [TensorSpec { name: OBS_INPUT.into(), shape: vec![-1, d] }];
        m.check_inputs(&pipeline.features, &want, &pipeline.symbols, pipeline.timeframe)
            .map_err(|mismatch| PolicyError::Mismatch { id: m.id.clone(), mismatch })?;
        let out_shape = vec![-1, a as i64];
        if !m.outputs.iter().any(|o| o.name == ACTION_OUTPUT && o.shape == out_shape) {
            return Err(PolicyError::Contract {
                id: m.id.clone(),
                reason: format!("expected output {ACTION_OUTPUT} of shape {out_shape:?}, manifest has {:?}", m.outputs),
            });
        }
        check_action_space(&m, &pipeline.action)
            .map_err(|e| PolicyError::Contract { id: m.id.clone(), reason: e.to_string() })?;
        let session = session(&m, bytes, opts)?;
        let fail = |e: ort::Error| PolicyError::Session { id: m.id.clone(), reason: e.to_string() };
        let obs = Tensor::from_array(([1usize, d as usize], vec![0.0f32; d as usize])).map_err(fail)?;
        let action_out = Tensor::from_array(([1usize, a], vec![0.0f32; a])).map_err(fail)?;
        let outputs = OutputSelector::no_default().with(ACTION_OUTPUT).preallocate(ACTION_OUTPUT, action_out);
        let run = RunOptions::new().map_err(fail)?.with_outputs(outputs);
        let mut p =
            PpoPolicy { manifest: m, session, obs, obs_dim: d as usize, run, n_assets: a, action: pipeline.action };
        let zeros = vec![0.0f32; d as usize];
        let mut out = vec![0.0f32; a];
        p.act_into(&zeros, &mut out)?;
        let algorithm = p.manifest.algorithm.as_str().to_uppercase();
        log::info!("policy: loaded {algorithm} model {} ({} inputs, {} assets), warm-up done", p.manifest.id, d, a);
        Ok(p)
    }

    /// The model's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The model's id (`ppo-…` or `sac-…`).
    pub fn id(&self) -> &str {
        &self.manifest.id
    }

    /// The observation's width.
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// The number of actions (one per symbol).
    pub fn n_assets(&self) -> usize {
        self.n_assets
    }

    /// The action space the engine sizes this model's actions in.
    pub fn action_space(&self) -> ActionSpace {
        self.action
    }

    /// The env settings the model was trained with (`params["env"]`): initial cash (the observation's
    /// scale) and the execution parameters (`max_trade` sizes an action). `None` when absent.
    pub fn env_params(&self) -> Option<(f64, ExecParams)> {
        let env = self.manifest.params.get("env")?;
        let cash = env.get("initial_cash")?.as_f64()?;
        let exec = serde_json::from_value(env.get("exec")?.clone()).ok()?;
        Some((cash, exec))
    }

    /// One observation in, one action per asset out.
    pub fn act(&mut self, obs: &[f32]) -> Result<Vec<f32>, PolicyError> {
        let mut out = vec![0.0; self.n_assets];
        self.act_into(obs, &mut out)?;
        Ok(out)
    }

    /// As `act`, writing into `out` (`n_assets` long): the observation is copied into the input value made
    /// at load and the actions read from the output value made at load; ONNX Runtime's own bookkeeping is
    /// the only allocation.
    pub fn act_into(&mut self, obs: &[f32], out: &mut [f32]) -> Result<(), PolicyError> {
        let id = &self.manifest.id;
        if obs.len() != self.obs_dim {
            return Err(PolicyError::InputLen { id: id.clone(), name: OBS_INPUT, got: obs.len(), want: self.obs_dim });
        }
        if out.len() != self.n_assets {
            return Err(PolicyError::InputLen {
                id: id.clone(),
                name: ACTION_OUTPUT,
                got: out.len(),
                want: self.n_assets,
            });
        }
        let fail = |e: ort::Error| PolicyError::Inference { id: id.clone(), reason: e.to_string() };
        self.obs.try_extract_tensor_mut::<f32>().map_err(fail)?.1.copy_from_slice(obs);
        let res = self.session.run_with_options(ort::inputs![&self.obs], &self.run).map_err(fail)?;
        let y = match res.get(ACTION_OUTPUT) {
            Some(v) => v.try_extract_tensor::<f32>().map_err(fail)?.1,
            None => &[][..],
        };
        if y.len() != out.len() {
            return Err(PolicyError::InputLen { id: id.clone(), name: ACTION_OUTPUT, got: y.len(), want: out.len() });
        }
        out.copy_from_slice(y);
        if out.iter().any(|v| !v.is_finite()) {
            return Err(PolicyError::NotFinite { id: id.clone(), output: out.to_vec() });
        }
        Ok(())
    }
}
