//! `PpoPolicy`: the portfolio policy (`obs [-1, 1 + A(1 + F)] -> action [-1, A]`, mean action in
//! [-1, 1], observation normalisation inside the graph), as the PPO model contract defines it. A SAC
//! policy (`algorithm = sac` in its manifest; its action `tanh(mean)`) keeps the same contract and is
//! served here too.

use super::{ModelSel, Pipeline, PolicyError, SessionOptions, fetch, session};
use crate::env::{ActionSpace, ExecParams};
use crate::models::{Manifest, ModelKind, Registry, TensorSpec};
use ndarray::Array2;
use ort::session::Session;
use ort::value::TensorRef;

pub const OBS_INPUT: &str = "obs";

/// The action space a PPO model was trained in (`params.env.action`; share counts for a model whose
/// manifest predates the choice), or why it cannot be read.
pub fn manifest_action_space(m: &Manifest) -> Result<ActionSpace, String> {
    match m.params.get("env").and_then(|e| e.get("action")) {
        None => Ok(ActionSpace::Shares),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            format!(
                "its manifest's action space {v} is not one this tradebot knows ({e}): retrain it with this tradebot"
            )
        }),
    }
}

/// Refuses a model whose action space differs from the config's `env.action_space`, naming both. The
/// kind must match (what the model's outputs mean); the band and the cap are the config's, applied when
/// trading.
pub fn check_action_space(m: &Manifest, config: &ActionSpace) -> Result<(), String> {
    let model = manifest_action_space(m)?;
    if model.name() != config.name() {
        return Err(format!(
            "it was trained in the {} action space, the config's env.action_space is \"{}\": set env.action_space = \"{}\" or retrain the model with this config (`tradebot train ppo`)",
            model.name(),
            config.name(),
            model.name()
        ));
    }
    Ok(())
}
pub const ACTION_OUTPUT: &str = "action";

pub struct PpoPolicy {
    manifest: Manifest,
    session: Session,
    obs: Array2<f32>,
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
            .map_err(|reason| PolicyError::Contract { id: m.id.clone(), reason })?;
        let session = session(&m, bytes, opts)?;
        let mut p = PpoPolicy {
            manifest: m,
            session,
            obs: Array2::zeros((1, d as usize)),
            n_assets: a,
            action: pipeline.action,
        };
        let zeros = vec![0.0f32; d as usize];
        let mut out = vec![0.0f32; a];
        p.act_into(&zeros, &mut out)?;
        let algorithm = p.manifest.algorithm.as_str().to_uppercase();
        log::info!("policy: loaded {algorithm} policy {} ({} inputs, {} assets), warm-up done", p.manifest.id, d, a);
        Ok(p)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn id(&self) -> &str {
        &self.manifest.id
    }

    pub fn obs_dim(&self) -> usize {
        self.obs.ncols()
    }

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

    /// As `act`, writing into `out` (`n_assets` long); no allocation besides ONNX Runtime's own.
    pub fn act_into(&mut self, obs: &[f32], out: &mut [f32]) -> Result<(), PolicyError> {
        let id = &self.manifest.id;
        if obs.len() != self.obs.ncols() {
            return Err(PolicyError::InputLen {
                id: id.clone(),
                name: OBS_INPUT,
                got: obs.len(),
                want: self.obs.ncols(),
            });
        }
        if out.len() != self.n_assets {
            return Err(PolicyError::InputLen {
                id: id.clone(),
                name: ACTION_OUTPUT,
                got: out.len(),
                want: self.n_assets,
            });
        }
        if let Some(row) = self.obs.as_slice_mut() {
            row.copy_from_slice(obs);
        }
        let fail = |e: ort::Error| PolicyError::Inference { id: id.clone(), reason: e.to_string() };
        let input = TensorRef::from_array_view(self.obs.view()).map_err(fail)?;
        let res = self.session.run(ort::inputs![OBS_INPUT => input]).map_err(fail)?;
        let (_, y) = res[ACTION_OUTPUT].try_extract_tensor::<f32>().map_err(fail)?;
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
