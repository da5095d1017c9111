//! The PPO training job (`tradebot train ppo`, feature `train`): the `[train]` bars of the configured symbols, aligned on
//! common times, become a `Panel` (config features) and the trading env (config env: `VecEnv` on the host, or on
//! CUDA the env kernel on the device, so that the whole rollout stays there); PPO trains on it with
//! `[ppo]` (from scratch, or from a registered model with `--warm-start`, `ppo_warm`), writing checkpoints;
//! the policy is exported to ONNX, checked against ONNX Runtime on 1,000 random observations, and
//! registered as a candidate with the PPO model contract's manifest and its final training state.

use super::checkpoint;
use super::device::{self, DeviceRequest, EnvBackend, Ran};
use super::progress::PpoProgress;
use super::{PpoJob, emit};
use crate::config::Config;
use crate::data::{align_bars, aligned_bars, snapshot::Snapshot};
use crate::domain::Bar;
use crate::env::{EnvConfig, Panel};
use crate::features::FEATURE_VERSION;
use crate::models::{Algorithm, FeatureRef, Manifest, ModelKind, Registry, TensorSpec};
use crate::out::outln;
use crate::rl::BatchEnv;
use crate::rl::ppo::{Ppo, UpdateStats};
use crate::rl::trading::{KernelTradingEnv, TradingEnv};
use anyhow::{Context, bail};
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// The tch and ONNX Runtime forwards must agree this closely, or the model is not registered.
pub(crate) const PARITY_TOLERANCE: f32 = 1e-5;
const PARITY_SAMPLES: i64 = 1000;
/// Environment steps when neither the job nor `retrain.ppo_steps` says.
pub(crate) const DEFAULT_STEPS: u64 = 200_000;

/// The training panel and the dates it covers.
pub(crate) struct TrainData {
    pub panel: Panel,
    pub first: NaiveDate,
    pub last: NaiveDate,
}

/// The configured symbols' bars over the `[train]` range, from the store (imported from `feed.file` when
/// missing) or from a dataset snapshot, aligned on common times and turned into a panel. With
/// `env.reward = "vs-benchmark"` and an index `env.benchmark`, the index's bars are loaded beside them
/// (aligned on the same days) as the panel's benchmark.
pub(crate) fn load_data(config: &Config, snapshot: Option<&std::path::Path>) -> anyhow::Result<TrainData> {
    let crate::env::Reward::VsBenchmark { benchmark: crate::env::Benchmark::Symbol(index), .. } = &config.env.reward
    else {
        return panel_of(config, load_bars(config, snapshot)?);
    };
    let sym = crate::domain::Symbol::new(index).map_err(|e| anyhow::anyhow!("env.benchmark = {index:?}: {e}"))?;
    let mut with_index = config.clone();
    with_index.market.symbols.push(sym);
    let mut bars = load_bars(&with_index, snapshot).with_context(|| format!("loading the benchmark {index}'s bars"))?;
    let index_bars = bars.pop().unwrap_or_default();
    let mut data = panel_of(config, bars)?;
    let skip = config.features.warmup().saturating_sub(1);
    let closes: Vec<f32> = index_bars.iter().skip(skip).map(|b| b.c as f32).collect();
    data.panel = data.panel.with_benchmark(closes).with_context(|| format!("env.benchmark = {index}"))?;
    Ok(data)
}

/// The configured symbols' bars over the `[train]` range, aligned on common times (one vector per symbol).
pub(crate) fn load_bars(config: &Config, snapshot: Option<&std::path::Path>) -> anyhow::Result<Vec<Vec<Bar>>> {
    let (from, to) = crate::data::day_window(config.train.from, config.train.train_end());
    let symbols = &config.market.symbols;
    Ok(match snapshot {
        Some(path) => {
            let snap = Snapshot::read(path)?;
            let mut per = Vec::new();
            for s in symbols {
                let Some((_, bars)) = snap.series.iter().find(|(sym, _)| sym == s) else {
                    bail!(
                        "snapshot {} has no bars for {s}; it must hold every symbol of market.symbols",
                        path.display()
                    );
                };
                per.push(bars.iter().filter(|b| b.t >= from && b.t <= to).cloned().collect());
            }
            align_bars(per)
        }
        None => {
            let store = crate::control::beside::open_or_snapshot(&config.state_dir).context("opening the store")?;
            crate::data::ensure_bars(config, &store)?;
            aligned_bars(&store, symbols, config.market.timeframe, from, to)?
        }
    })
}

/// Aligned bars (`load_bars`) as a training panel, checked: finite features, room for an episode.
pub(crate) fn panel_of(config: &Config, assets: Vec<Vec<Bar>>) -> anyhow::Result<TrainData> {
    let symbols = &config.market.symbols;
    let day = |d: Option<NaiveDate>| d.map_or_else(|| "(open)".to_string(), |d| d.to_string());
    let range = format!("[train] range {}..={}", day(config.train.from), day(config.train.train_end()));
    let (Some(first), Some(last)) = (assets[0].first(), assets[0].last()) else {
        bail!(
            "no {} bars of {} on common days in the {range}: import data (`tradebot data import`) or widen train.from / train.to",
            config.market.timeframe,
            crate::domain::symbol_list(symbols)
        );
    };
    let (first, last) = (first.t.date_naive(), last.t.date_naive());
    let days = assets[0].len();
    let warmup = config.features.warmup();
    let panel = Panel::from_bars(&config.features, &assets)
        .with_context(|| format!("{days} common days in the {range}; the features need {warmup} days of warm-up"))?;
    if let Some(i) = panel.features.iter().position(|x| !x.is_finite()) {
        let nf = panel.n_features.max(1);
        let (row, k) = (i / nf, i % nf);
        let name = config.features.names().get(k).cloned().unwrap_or_default();
        bail!(
            "feature {name} of {} is not finite on training day {} of {}: check the stored bars (`tradebot data show`)",
            symbols[row % panel.n_assets],
            row / panel.n_assets,
            panel.n_days
        );
    }
    if config.env.episode_len >= panel.n_days {
        bail!(
            "env.episode_len = {} but the {range} has only {} usable days ({days} common days less {} of feature warm-up): lower env.episode_len below {} or widen the range",
            config.env.episode_len,
            panel.n_days,
            days - panel.n_days,
            panel.n_days
        );
    }
    Ok(TrainData { panel, first, last })
}

/// The env PPO trains on, the device it trains on and what ran. On CUDA, the env kernel on the device
/// (either action space, share counts or target weights, and every `env.reward`): actions, observations,
/// rewards and done flags stay there for the whole rollout. On the CPU, `VecEnv`. Where the kernel cannot
/// start on CUDA (no NVRTC, a driver too old for the code, FinRL's accounting), `--device cuda` fails with
/// the reason; `--device auto` says why once and trains on the CPU.
pub(crate) fn training_env(
    cfg: &EnvConfig,
    panel: Arc<Panel>,
    device: Device,
    requested: DeviceRequest,
) -> anyhow::Result<(Box<dyn BatchEnv + Send>, Device, Ran)> {
    let ran = |device: Device, env| Ran { requested, device: super::device_name(device), env };
    if device.is_cuda() {
        let dev = super::device_name(device);
        match KernelTradingEnv::new(cfg, &panel, device) {
            Ok(env) => {
                log::info!("the environment steps on {dev} (the env kernel): the rollout stays on the GPU");
                return Ok((Box::new(env), device, ran(device, EnvBackend::Kernel)));
            }
            Err(e) if requested == DeviceRequest::Auto => {
                log::warn!("--device auto: the env kernel cannot run on {dev} ({e}); training on the CPU (VecEnv)")
            }
            Err(e) => bail!(
                "--device {requested}: the env kernel cannot run on {dev}: {e}; `tradebot doctor` shows the driver, NVRTC and the GPU; or use --device cpu (or auto, which falls back to the CPU)"
            ),
        }
    }
    let env = TradingEnv::new(cfg.clone(), panel).context("building the trading env")?;
    Ok((Box::new(env), Device::Cpu, ran(Device::Cpu, EnvBackend::VecEnv)))
}

/// Trains, exports, checks and registers; returns the candidate's model id.
pub(crate) fn run(args: PpoJob) -> anyhow::Result<String> {
    let config = run_config(&args)?;
    let requested = args.device;
    let device = device::resolve(requested)?;
    let snapshot = super::snapshot_path(args.data.as_deref());
    let data = load_data(&config, snapshot.as_deref())?;
    let dates = (data.first, data.last);
    let (mut env, device, ran) = training_env(&config.env, Arc::new(data.panel), device, requested)?;
    let total_steps = args.steps.or(config.retrain.ppo_steps).unwrap_or(DEFAULT_STEPS);
    if total_steps == 0 {
        bail!("--steps 0: train for at least one step");
    }
    if args.resume && args.warm_start.is_some() {
        bail!("--resume and --warm-start exclude each other: resume a run, or start one from a model");
    }
    let fresh = || Ppo::new(config.ppo.clone(), env.obs_dim(), env.act_dim(), device);
    let mut ppo = fresh()?;
    let warm = match args.warm_start.as_deref() {
        Some(id) => Some(super::ppo_warm::warm_start(&config, &draft(&config, &ppo, dates, None, 0.0)?, &ppo, id)),
        None => None,
    };
    // A warm start that fell back may have loaded part of the state: train from fresh weights.
    if warm.as_ref().is_some_and(|w| !w.warm) {
        ppo = fresh()?;
    }
    log::info!("training PPO on {} with the {} trainer", super::device_name(device), ppo.backend());
    let per_update = (config.ppo.n_steps * env.num_envs()) as u64;
    let (total_updates, _, rounding) = super::whole_updates(total_steps, env.num_envs(), config.ppo.n_steps);
    if let Some(note) = rounding {
        log::info!("{note}");
    }
    let ckpt_dir = config.state_dir.join("checkpoints").join("ppo");
    if args.resume {
        resume(&mut ppo, &ckpt_dir)?;
    }
    let progress = PpoProgress::new(args.json, total_updates, total_updates * per_update, ppo.env_steps)
        .with_gpu(device)
        .with_ran(&ran);
    let started = Instant::now();
    let every = config.train.checkpoint_every as u64;
    let last = train_with_checkpoints(&mut ppo, &mut *env, total_updates, every, &ckpt_dir, &progress)?;
    let seconds = started.elapsed().as_secs_f64();
    let max_diff_and_bytes = export_checked(&ppo, &config)?;
    let mut draft = draft(&config, &ppo, dates, last.as_ref(), seconds)?;
    if let Some(w) = &warm {
        draft.params.insert("warm_start".into(), serde_json::to_value(w)?);
        draft.parent = w.champion.clone().filter(|_| w.warm);
    }
    let state = super::ppo_warm::state_bytes(&ppo)?;
    let manifest = register_policy_state(&config, draft, max_diff_and_bytes, &ran, Some(&state))?;
    if args.json {
        let mut done = serde_json::json!({ "event": "done", "model_id": manifest.id, "metrics": manifest.metrics });
        if let Some(w) = &warm {
            done["warm_start"] = serde_json::to_value(w)?;
        }
        ran.tag(&mut done);
        emit(&done);
    } else {
        eprintln!(
            "trained {} updates ({} env steps) on {} ({} env) in {seconds:.1} s; registered candidate {} in {}",
            ppo.updates,
            ppo.env_steps,
            ran.device,
            ran.env.as_str(),
            manifest.id,
            config.state_dir.join("models").display()
        );
        outln!("{}", manifest.id)?;
    }
    Ok(manifest.id)
}

/// Trains `ppo` to `total_updates`, with a checkpoint every `every` updates and at the end (a failed
/// save stops the run with its error); the last update's statistics.
fn train_with_checkpoints(
    ppo: &mut Ppo,
    env: &mut (dyn BatchEnv + Send),
    total_updates: u64,
    every: u64,
    ckpt_dir: &std::path::Path,
    progress: &PpoProgress,
) -> anyhow::Result<Option<UpdateStats>> {
    let mut last: Option<UpdateStats> = None;
    let mut ckpt_err = None;
    ppo.train_until(env, 0, total_updates, |p, s| {
        progress.update(s);
        last = Some(s.clone());
        if (s.update % every == 0 || s.update >= total_updates)
            && let Err(e) = checkpoint::save(ckpt_dir, p, total_updates)
        {
            ckpt_err = Some(e);
            return false;
        }
        true
    })?;
    progress.finish();
    match ckpt_err {
        Some(e) => Err(e),
        None => Ok(last),
    }
}

/// The job's config with its training window as dates (a rolling window resolved on the retrain's day,
/// `$TRADEBOT_TRAIN_AS_OF`, before a replay, or today) and the retrain's seed, when it passes one.
fn run_config(args: &PpoJob) -> anyhow::Result<Config> {
    let (mut config, seed) = super::dated_config(&args.config)?;
    if let Some(seed) = seed {
        log::info!("seed {seed} (the retrain's, in place of ppo.seed and env.seed)");
        config.ppo.seed = seed;
        config.env.seed = seed;
    }
    Ok(config)
}

/// The newest checkpoint in `ckpt_dir` loaded into `ppo`, its update and step counts included (`--resume`).
fn resume(ppo: &mut Ppo, ckpt_dir: &std::path::Path) -> anyhow::Result<()> {
    let Some((path, meta)) = checkpoint::latest(ckpt_dir)? else {
        bail!("--resume: no checkpoint in {}; train once without --resume", ckpt_dir.display());
    };
    ppo.load_weights(&path.join(checkpoint::WEIGHTS)).with_context(|| {
        format!(
            "checkpoint {} does not fit this config (network or observation size changed?): train without --resume",
            path.display()
        )
    })?;
    ppo.updates = meta.updates;
    ppo.env_steps = meta.env_steps;
    log::info!("resuming from {} (update {}, {} env steps)", path.display(), meta.updates, meta.env_steps);
    Ok(())
}

/// The policy as ONNX bytes, refused unless ONNX Runtime's forward matches tch's on 1,000 random
/// observations (scaled by the observation statistics) within `PARITY_TOLERANCE`.
pub(crate) fn export_checked(ppo: &Ppo, config: &Config) -> anyhow::Result<(f32, Vec<u8>)> {
    let policy = ppo.export_policy(Some(1.0))?;
    let bytes = policy.to_onnx("obs", "action", &[("producer", "tradebot train ppo")])?;
    let d = policy.obs_dim() as i64;
    let (mean, var) = (ppo.norm.mean.to_device(Device::Cpu), ppo.norm.var.to_device(Device::Cpu));
    let obs = Tensor::randn([PARITY_SAMPLES, d], (Kind::Float, Device::Cpu)) * var.sqrt() * 2.0 + mean;
    let want = ppo.act_deterministic(&obs).clamp(-1.0, 1.0).to_device(Device::Cpu);
    let want = Vec::<f32>::try_from(want.reshape([-1]))?;
    let got = onnx_forward(config, &bytes, &Vec::<f32>::try_from(obs.reshape([-1]))?, d as usize)?;
    let max_diff = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    if got.len() != want.len() || got.iter().chain(&want).any(|x| !x.is_finite()) || max_diff > PARITY_TOLERANCE {
        bail!(
            "the exported ONNX policy disagrees with the trained one by {max_diff} (tolerance {PARITY_TOLERANCE}) on {PARITY_SAMPLES} random observations: not registered; this is a bug in the exporter, please report it"
        );
    }
    Ok((max_diff, bytes))
}

/// Runs the ONNX policy in ONNX Runtime on `obs` (`n x d`, row-major); returns the actions, flattened.
pub(crate) fn onnx_forward(config: &Config, bytes: &[u8], obs: &[f32], d: usize) -> anyhow::Result<Vec<f32>> {
    let rt = crate::runtime_libs::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let mut s = ort::session::Session::builder(&rt.env)?.commit_from_memory(bytes)?;
    let x = ndarray::Array2::from_shape_vec((obs.len() / d.max(1), d), obs.to_vec())?;
    let out = s.run(ort::inputs!["obs" => ort::value::TensorRef::from_array_view(x.view())?])?;
    Ok(out["action"].try_extract_array::<f32>()?.iter().copied().collect())
}

pub(crate) fn register(
    config: &Config,
    ppo: &Ppo,
    dates: (NaiveDate, NaiveDate),
    last: Option<&UpdateStats>,
    seconds: f64,
    checked: (f32, Vec<u8>),
    ran: &Ran,
) -> anyhow::Result<Manifest> {
    let state = super::ppo_warm::state_bytes(ppo)?;
    register_policy_state(config, draft(config, ppo, dates, last, seconds)?, checked, ran, Some(&state))
}

/// Registers a policy's checked export (`(max_diff, bytes)`) with its draft manifest: the ONNX parity and
/// where it trained (the device and the env that actually ran: `--device auto` may have fallen back), and
/// the trainer's state kept beside the model (`models::state`) when given.
pub(crate) fn register_policy_state(
    config: &Config,
    mut draft: Manifest,
    (max_diff, bytes): (f32, Vec<u8>),
    ran: &Ran,
    state: Option<&[u8]>,
) -> anyhow::Result<Manifest> {
    draft.metrics.insert("onnx_max_abs_diff".to_string(), f64::from(max_diff));
    draft.params.insert("trained_on".to_string(), ran.to_json());
    let reg = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    Ok(reg.add_with_state(&bytes, draft, state)?)
}

/// The manifest of a PPO model trained with `config` (the PPO model contract), before registration.
pub(crate) fn draft(
    config: &Config,
    ppo: &Ppo,
    dates: (NaiveDate, NaiveDate),
    last: Option<&UpdateStats>,
    seconds: f64,
) -> anyhow::Result<Manifest> {
    let mut metrics = base_metrics(ppo.env_steps, ppo.updates, seconds);
    if let Some(s) = last {
        metrics.insert("approx_kl".into(), s.approx_kl);
        metrics.insert("clip_fraction".into(), s.clip_fraction);
        metrics.insert("explained_variance".into(), s.explained_variance);
        if let Some(r) = s.mean_return {
            metrics.insert("mean_return".into(), r);
        }
    }
    policy_manifest(config, Algorithm::Ppo, dates, metrics, ("ppo", serde_json::to_value(&config.ppo)?))
}

/// The training metrics every policy's manifest has: env steps, updates and seconds of training.
pub(crate) fn base_metrics(env_steps: u64, updates: u64, seconds: f64) -> BTreeMap<String, f64> {
    BTreeMap::from([
        ("env_steps".to_string(), env_steps as f64),
        ("updates".to_string(), updates as f64),
        ("train_seconds".to_string(), seconds),
    ])
}

/// The manifest of a policy trained with `config` under the PPO model contract (inputs, outputs,
/// `params.env`, `params.feature_spec`), with its algorithm, its hyper-parameters under `params[key]`
/// and its training metrics, before registration.
pub(crate) fn policy_manifest(
    config: &Config,
    algorithm: Algorithm,
    (first, last_day): (NaiveDate, NaiveDate),
    metrics: BTreeMap<String, f64>,
    (key, hyper): (&str, serde_json::Value),
) -> anyhow::Result<Manifest> {
    let (a, f) = (config.market.symbols.len() as i64, config.features.n_cols() as i64);
    let params = BTreeMap::from([
        ("env".to_string(), serde_json::to_value(&config.env)?),
        ("feature_spec".to_string(), serde_json::to_value(&config.features)?),
        (key.to_string(), hyper),
    ]);
    let features = FeatureRef { version: FEATURE_VERSION, names: config.features.names() };
    let inputs = vec![TensorSpec { name: "obs".into(), shape: vec![-1, 1 + a * (1 + f)] }];
    let outputs = vec![TensorSpec { name: "action".into(), shape: vec![-1, a] }];
    let symbols = config.market.symbols.clone();
    Ok(Manifest {
        algorithm,
        train_from: Some(config.train.from.unwrap_or(first)),
        train_to: Some(config.train.train_end().unwrap_or(last_day)),
        holdout_from: config.train.holdout_from,
        holdout_to: config.train.holdout_to,
        metrics,
        params,
        ..Manifest::draft(ModelKind::Ppo, features, inputs, outputs, symbols, config.market.timeframe)
    })
}
