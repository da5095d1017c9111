//! The SAC training job (`tradebot train sac`, feature `train`): the same data and trading env as PPO's
//! (`training::ppo::load_data`; `VecEnv` on the host), SAC with `[sac]` (its networks and replay buffer
//! on the training device), the deterministic actor `tanh(mean)` exported to ONNX, checked against
//! ONNX Runtime on 1,000 random observations, and registered as a candidate policy: `ModelKind::Ppo`
//! (the engine's policy slot and contract, `obs -> action` in [-1, 1] per symbol, in the configured
//! action space) with `algorithm = sac` in its manifest, its training state kept beside it
//! (`Sac::state_variables`: the actor, the critics and their targets, the temperature, the observation
//! statistics). `--warm-start ID` starts from a SAC policy's state as PPO's does (`ppo_warm`): the replay
//! buffer and Adam start empty, and where it cannot (not a SAC policy, another network or contract, no
//! state kept) the run trains from scratch and says why.

use super::device::{self, EnvBackend, Ran};
use super::ppo::{PARITY_TOLERANCE, base_metrics, load_data, onnx_forward, policy_manifest, register_policy_state};
use super::{SacJob, emit};
use crate::config::Config;
use crate::models::{Algorithm, Manifest};
use crate::out::outln;
use crate::rl::BatchEnv;
use crate::rl::sac::{Sac, SacStats};
use crate::rl::trading::TradingEnv;
use anyhow::{Context, bail};
use chrono::NaiveDate;
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

const PARITY_SAMPLES: i64 = 1000;
/// Environment steps when neither the job nor `retrain.sac_steps` says.
pub(crate) const DEFAULT_STEPS: u64 = 100_000;
/// Progress lines per run.
const REPORTS: u64 = 50;

/// Trains, exports, checks and registers; returns the candidate's model id.
pub(crate) fn run(args: SacJob) -> anyhow::Result<String> {
    let (mut config, seed) = super::dated_config(&args.config)?;
    if let Some(seed) = seed {
        log::info!("seed {seed} (the retrain's, in place of sac.seed and env.seed)");
        config.sac.seed = seed;
        config.env.seed = seed;
    }
    let requested = args.device;
    let device = device::resolve(requested)?;
    let snapshot = super::snapshot_path(args.data.as_deref());
    let data = load_data(&config, snapshot.as_deref())?;
    let dates = (data.first, data.last);
    // The env kernel is PPO's (its rollout never leaves the GPU); SAC steps VecEnv on the host and keeps
    // its networks and replay buffer on the training device.
    let mut env = TradingEnv::new(config.env.clone(), Arc::new(data.panel)).context("building the trading env")?;
    let ran = Ran { requested, device: super::device_name(device), env: EnvBackend::VecEnv };
    if device.is_cuda() {
        log::info!("SAC's networks and replay buffer on {}; the env steps on the CPU (VecEnv)", ran.device);
    }
    let total_steps = args.steps.or(config.retrain.sac_steps).unwrap_or(DEFAULT_STEPS);
    if total_steps == 0 {
        bail!("--steps 0: train for at least one step");
    }
    let fresh = || Sac::new(config.sac.clone(), env.obs_dim(), env.act_dim(), env.num_envs(), device);
    let mut sac = fresh()?;
    let warm = match args.warm_start.as_deref() {
        Some(id) => Some(warm_start(&config, &draft(&config, &sac, dates, None, 0.0)?, &sac, id)),
        None => None,
    };
    // A warm start that fell back may have loaded part of the state: train from fresh networks.
    if warm.as_ref().is_some_and(|w| !w.warm) {
        sac = fresh()?;
    }
    log::info!("training SAC on {} for {total_steps} env steps ({} envs)", ran.device, env.num_envs());
    let started = Instant::now();
    let mut last: Option<SacStats> = None;
    let every = (total_steps / REPORTS).max(1);
    sac.train(&mut env, total_steps, every, |s| {
        report(args.json, s, total_steps, &ran);
        last = Some(s.clone());
        true
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let checked = export_checked(&sac, &config)?;
    let mut draft = draft(&config, &sac, dates, last.as_ref(), seconds)?;
    if let Some(w) = &warm {
        draft.params.insert("warm_start".into(), serde_json::to_value(w)?);
        draft.parent = w.champion.clone().filter(|_| w.warm);
    }
    let manifest = register_policy_state(&config, draft, checked, &ran, Some(&state_bytes(&sac)?))?;
    if args.json {
        let mut done = serde_json::json!({ "event": "done", "model_id": manifest.id, "metrics": manifest.metrics });
        if let Some(w) = &warm {
            done["warm_start"] = serde_json::to_value(w)?;
        }
        ran.tag(&mut done);
        emit(&done);
    } else {
        eprintln!(
            "trained SAC for {} env steps ({} gradient steps) on {} in {seconds:.1} s; registered candidate {} in {}",
            sac.env_steps,
            sac.updates,
            ran.device,
            manifest.id,
            config.state_dir.join("models").display()
        );
        outln!("{}", manifest.id)?;
    }
    Ok(manifest.id)
}

/// A progress line: JSON (the retrain child's protocol) or one line on stderr.
fn report(json: bool, s: &SacStats, total: u64, ran: &Ran) {
    if json {
        let mut v = serde_json::to_value(s).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("event".into(), "progress".into());
            o.insert("total_steps".into(), total.into());
            let eta = total.saturating_sub(s.env_steps) as f64 / s.steps_per_sec.max(1e-9);
            o.insert("eta_secs".into(), eta.into());
        }
        ran.tag(&mut v);
        emit(&v);
        return;
    }
    let ret = s.mean_return.map_or("-".to_string(), |r| format!("{r:+.4}"));
    eprintln!(
        "{}/{total} steps | {:.0} steps/s | return {ret} | critic {:.4} | actor {:.4} | alpha {:.4}",
        s.env_steps, s.steps_per_sec, s.critic_loss, s.actor_loss, s.alpha
    );
}

/// The deterministic actor as ONNX bytes, refused unless ONNX Runtime's forward matches tch's on 1,000
/// random observations (scaled by the observation statistics) within `PARITY_TOLERANCE`.
pub(crate) fn export_checked(sac: &Sac, config: &Config) -> anyhow::Result<(f32, Vec<u8>)> {
    let policy = sac.export_policy()?;
    let bytes = policy.to_onnx("obs", "action", &[("producer", "tradebot train sac")])?;
    let d = policy.obs_dim() as i64;
    let (mean, var) = (sac.norm.mean.to_device(Device::Cpu), sac.norm.var.to_device(Device::Cpu));
    let obs = Tensor::randn([PARITY_SAMPLES, d], (Kind::Float, Device::Cpu)) * var.sqrt() * 2.0 + mean;
    let want = Vec::<f32>::try_from(sac.act_deterministic(&obs).to_device(Device::Cpu).reshape([-1]))?;
    let got = onnx_forward(config, &bytes, &Vec::<f32>::try_from(obs.reshape([-1]))?, d as usize)?;
    let max_diff = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    if got.len() != want.len() || got.iter().chain(&want).any(|x| !x.is_finite()) || max_diff > PARITY_TOLERANCE {
        bail!(
            "the exported ONNX policy disagrees with the trained SAC actor by {max_diff} (tolerance {PARITY_TOLERANCE}) on {PARITY_SAMPLES} random observations: not registered; this is a bug in the exporter, please report it"
        );
    }
    Ok((max_diff, bytes))
}

/// Registers the checked export of `sac` as a candidate policy in `config.state_dir`'s registry, its
/// training state kept beside it.
pub(crate) fn register(
    config: &Config,
    sac: &Sac,
    dates: (NaiveDate, NaiveDate),
    last: Option<&SacStats>,
    seconds: f64,
    checked: (f32, Vec<u8>),
    ran: &Ran,
) -> anyhow::Result<Manifest> {
    let state = state_bytes(sac)?;
    register_policy_state(config, draft(config, sac, dates, last, seconds)?, checked, ran, Some(&state))
}

/// The trainer's state as the registry keeps it beside a SAC policy (safetensors, `models::state`).
pub(crate) fn state_bytes(sac: &Sac) -> anyhow::Result<Vec<u8>> {
    super::ppo_warm::vars_bytes(sac.state_variables())
}

/// Starts `sac` (fresh from `Sac::new`) from the SAC policy `id` in `config`'s registry, or leaves it and
/// says why (`ppo_warm::warm_start`, with SAC's variables). `want` is the manifest this run's model gets.
pub(crate) fn warm_start(config: &Config, want: &Manifest, sac: &Sac, id: &str) -> crate::retrain::WarmStart {
    let what = "actor, twin critics and their targets, temperature, observation statistics";
    super::ppo_warm::warm_start_vars(config, want, sac.state_variables(), id, what)
}

/// The manifest of a SAC policy trained with `config`: the PPO model contract (inputs, outputs,
/// `params.env`), `algorithm = sac`, `params.sac`.
pub(crate) fn draft(
    config: &Config,
    sac: &Sac,
    dates: (NaiveDate, NaiveDate),
    last: Option<&SacStats>,
    seconds: f64,
) -> anyhow::Result<Manifest> {
    let mut metrics = base_metrics(sac.env_steps, sac.updates, seconds);
    if let Some(s) = last {
        metrics.insert("alpha".into(), s.alpha);
        metrics.insert("critic_loss".into(), s.critic_loss);
        if let Some(r) = s.mean_return {
            metrics.insert("mean_return".into(), r);
        }
    }
    policy_manifest(config, Algorithm::Sac, dates, metrics, ("sac", serde_json::to_value(&config.sac)?))
}

#[cfg(test)]
mod tests;
