//! A PPO run that starts from a registered policy (`tradebot train ppo --warm-start ID`, which the weekend
//! retrain passes with the champion's id under `retrain.warm_start`), and the trainer's state as the
//! registry keeps it beside each PPO model (`models::state`): every variable of the trainer but Adam's
//! (actor, critic, log-std, observation statistics), as safetensors. A SAC run does the same with its own
//! variables (`sac_warm`), through the same checks and files.
//!
//! A warm start loads all of them, and Adam starts afresh (zero moments, step 0): the run refines the
//! champion on the new window with its own learning-rate schedule. Where it cannot (no such model, a SAC
//! policy, another network or observation/action contract than the config's, no training state kept, a
//! missing or corrupt file), the run trains from scratch and says why: in the log, in its `done` line and
//! in the candidate's manifest (`params.warm_start`), whence the retrain's record.

use crate::config::Config;
use crate::models::{Manifest, MismatchError, ModelKind, Registry, RegistryError, StateError};
use crate::retrain::WarmStart;
use crate::rl::ppo::Ppo;
use anyhow::Context;
use std::collections::HashMap;
use std::path::Path;
use tch::{Device, Tensor};

/// Why a run cannot start from a model's training state (it trains from scratch and says this).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WarmError {
    #[error("{}", .0)]
    Registry(#[from] RegistryError),
    #[error("{}", .0)]
    State(#[from] StateError),
    #[error("{}", .0)]
    Inputs(#[from] MismatchError),
    #[error("{path} does not read as safetensors: {source}")]
    NotSafetensors { path: String, source: tch::TchError },
    #[error("its state has no variable {0}: it was written for another network")]
    MissingVariable(String),
    #[error("its {name} is {theirs}, this config's is {ours}: another network or observation size")]
    Shape { name: String, theirs: String, ours: String },
    #[error("its state has a variable {0} this config's network lacks: another network")]
    ExtraVariable(String),
    #[error("copying its state into the trainer: {0}")]
    Copy(tch::TchError),
    #[error("{id} is a {what} model: a {algorithm} run can start only from a {algorithm} policy")]
    NotSame { id: String, what: String, algorithm: String },
    #[error("{id} outputs {theirs}, this config's policy {ours}")]
    Outputs { id: String, theirs: String, ours: String },
    /// A kept hyper-parameter differs (`detail` names it and both values); `what` differs with it.
    #[error("{detail}: {what}")]
    Contract { detail: String, what: &'static str },
}

/// The trainer's variables the registry keeps (all but Adam's), by name, in name order.
fn kept_variables(ppo: &Ppo) -> Vec<(String, Tensor)> {
    let mut vars: Vec<(String, Tensor)> =
        ppo.vs.variables().into_iter().filter(|(n, _)| !crate::ml::optim::Adam::is_state(n)).collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

/// The trainer's state as the registry keeps it beside a model: safetensors bytes of every variable but
/// Adam's.
pub(crate) fn state_bytes(ppo: &Ppo) -> anyhow::Result<Vec<u8>> {
    vars_bytes(kept_variables(ppo))
}

/// Safetensors bytes of `vars` (a trainer's kept variables), copied to the CPU.
pub(crate) fn vars_bytes(vars: Vec<(String, Tensor)>) -> anyhow::Result<Vec<u8>> {
    let vars: Vec<(String, Tensor)> =
        vars.into_iter().map(|(n, t)| (n, t.to_device(Device::Cpu).contiguous())).collect();
    let tmp = tempfile::Builder::new().prefix("policy-").suffix(".safetensors").tempfile()?;
    Tensor::write_safetensors(&vars, tmp.path()).context("writing the policy's training state")?;
    std::fs::read(tmp.path()).context("reading the policy's training state back")
}

/// Loads a state written by `state_bytes` into `ppo` (`load_vars`).
#[cfg(test)]
pub(crate) fn load_state(ppo: &Ppo, path: &Path) -> Result<(), WarmError> {
    load_vars(kept_variables(ppo), path)
}

/// Loads a state written by `vars_bytes` into a trainer's kept variables `vars` (each shares its storage
/// with the trainer's): every one must be in the file, with its shape and type, and nothing else; all are
/// checked before any is copied. The optimisers' state is not touched.
pub(crate) fn load_vars(vars: Vec<(String, Tensor)>, path: &Path) -> Result<(), WarmError> {
    let file = Tensor::read_safetensors(path)
        .map_err(|source| WarmError::NotSafetensors { path: path.display().to_string(), source })?;
    let mut file: HashMap<String, Tensor> = file.into_iter().collect();
    let mut pairs = Vec::new();
    for (name, var) in vars {
        let Some(src) = file.remove(&name) else {
            return Err(WarmError::MissingVariable(name));
        };
        if src.size() != var.size() || src.kind() != var.kind() {
            let show = |t: &Tensor| format!("{:?} {:?}", t.kind(), t.size());
            return Err(WarmError::Shape { name, theirs: show(&src), ours: show(&var) });
        }
        pairs.push((var, src));
    }
    if let Some(extra) = file.keys().min() {
        return Err(WarmError::ExtraVariable(extra.clone()));
    }
    tch::no_grad(|| {
        for (mut var, src) in pairs {
            var.f_copy_(&src.to_device(var.device())).map_err(WarmError::Copy)?;
        }
        Ok(())
    })
}

/// Starts `ppo` (fresh from `Ppo::new`) from the model `id` in `config`'s registry, or leaves it and says
/// why. `want` is the manifest a model trained with `config` gets (`ppo::draft`): the contract the model
/// must have. A `warm: false` answer may leave `ppo` partly loaded only if a copy failed after every check
/// passed: the caller builds a fresh one then.
pub(crate) fn warm_start(config: &Config, want: &Manifest, ppo: &Ppo, id: &str) -> WarmStart {
    warm_start_vars(config, want, kept_variables(ppo), id, "actor, critic, observation statistics")
}

/// `warm_start` for any policy trainer: `vars` its kept variables, `what` says them in the log.
pub(crate) fn warm_start_vars(
    config: &Config,
    want: &Manifest,
    vars: Vec<(String, Tensor)>,
    id: &str,
    what: &str,
) -> WarmStart {
    match try_warm(config, want, vars, id) {
        Ok(()) => {
            let algorithm = want.algorithm.as_str().to_uppercase();
            log::info!("warm start: {algorithm} starts from {id}'s training state ({what}; Adam afresh)");
            WarmStart { champion: Some(id.to_string()), warm: true, reason: None }
        }
        Err(reason) => {
            log::warn!("warm start: cannot start from {id}: {reason}; training from scratch");
            WarmStart::scratch(Some(id.to_string()), reason.to_string())
        }
    }
}

fn try_warm(config: &Config, want: &Manifest, vars: Vec<(String, Tensor)>, id: &str) -> Result<(), WarmError> {
    let reg = Registry::open_read_only(&config.state_dir.join("models"));
    let m = reg.get(id)?;
    check_contract(want, &m)?;
    let (_, path) = reg.training_state(id)?;
    load_vars(vars, &path)
}

/// The model `m` trained the network this run builds, on the observations and actions it gives it (`want`,
/// the manifest this run's model gets): a policy of the same algorithm (PPO's or SAC's) with the same
/// features, symbols, timeframe, input and output shapes, action space, observation scale
/// (`env.initial_cash`), hidden layers, activation and observation normalisation.
pub(crate) fn check_contract(want: &Manifest, m: &Manifest) -> Result<(), WarmError> {
    if m.kind != ModelKind::Ppo || m.algorithm != want.algorithm {
        let what = if m.kind == ModelKind::Ppo { m.algorithm.as_str() } else { m.kind.as_str() };
        let algorithm = want.algorithm.as_str().to_uppercase();
        return Err(WarmError::NotSame { id: m.id.clone(), what: what.to_string(), algorithm });
    }
    m.check_inputs(&want.features, &want.inputs, &want.symbols, want.timeframe)?;
    if m.outputs != want.outputs {
        let show = |o: &[crate::models::TensorSpec]| format!("{o:?}");
        return Err(WarmError::Outputs { id: m.id.clone(), theirs: show(&m.outputs), ours: show(&want.outputs) });
    }
    let differs = |section: &str, keys: &[&str]| -> Option<String> {
        let (theirs, ours) = (m.params.get(section), want.params.get(section));
        keys.iter().find_map(|k| {
            let path: Vec<&str> = k.split('.').collect();
            let get = |v: Option<&serde_json::Value>| path.iter().try_fold(v?, |v, p| v.get(p)).cloned();
            let (a, b) = (get(theirs), get(ours));
            (a != b).then(|| {
                let show = |v: Option<serde_json::Value>| v.map_or_else(|| "(unset)".to_string(), |v| v.to_string());
                format!("{} has {section}.{k} = {}, this config {}", m.id, show(a), show(b))
            })
        })
    };
    if let Some(detail) = differs("env", &["action.kind", "initial_cash"]) {
        return Err(WarmError::Contract { detail, what: "another observation or action contract" });
    }
    if let Some(detail) = differs(want.algorithm.as_str(), &["hidden", "activation", "normalize_obs"]) {
        return Err(WarmError::Contract { detail, what: "another network" });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
