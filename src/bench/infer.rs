//! `tradebot bench infer`: per-decision latency of the daemon's own `Engine` on one thread, over the
//! stored bars of the configured symbols: the bars of one close through `Engine::process` (streaming
//! features for every symbol, the PPO observation, ONNX inference, the strategy's orders, the risk checks,
//! the order manager's order records), exactly as a replay or the live runner drives it, with the
//! simulated broker filling the orders at the next close (`backtest::session`), over an account in memory
//! (`Store::in_memory`: no file, no flush), so that the figure is the engine's compute. For the champion
//! PPO model (or `--model`, or with neither a random model of `[ppo].hidden`, said so in the output). p50
//! and p99 in µs. The same decisions are then timed over an account on disk (`bench-infer` under the
//! state directory, removed after), with each close's durable flushes counted: the durable writes apart.
//! Inference alone is then timed as the Python peer times it, call after call over the engine's own
//! observations.
//! `--export DIR` writes the ONNX file and the observations (`obs.bin`, f32 little-endian, `obs_dim`
//! wide) so `benches/peers/ort_python.py` can time onnxruntime's Python API on the same work.

use crate::backtest::session::{SessionHooks, SimSession};
use crate::backtest::sim::SimVenue;
use crate::config::Config;
use crate::domain::Timeframe;
use crate::engine::StrategyMode;
use crate::engine::drive::{Flow, Hooks, Moment};
use crate::engine::{Command, Engine};
use crate::models::{Manifest, ModelKind, Registry, TensorSpec};
use crate::onnx::mlp::{MlpPolicy, ObsNorm, Squash};
use crate::onnx::{Activation, Dense};
use crate::out::outln;
use crate::policy::{ModelSel, Pipeline, PpoPolicy, SessionOptions};
use crate::store::Store;
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The arguments of `tradebot bench infer`.
#[derive(Debug, Clone, clap::Args)]
pub struct InferBench {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// A PPO model id, `champion` (the default) or `latest` (the PPO model trained last).
    #[arg(long)]
    pub model: Option<String>,
    /// Decisions timed (passes over the stored bars repeat as needed).
    #[arg(long, default_value_t = 20_000)]
    pub decisions: usize,
    /// ONNX Runtime intra-op threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Write model.onnx and obs.bin here for the Python peer.
    #[arg(long)]
    pub export: Option<PathBuf>,
    /// The figures as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A random (untrained) PPO model of the configured sizes and action space, for machines without a
/// champion yet.
fn synthetic(pl: &Pipeline, hidden: &[i64], act: Activation) -> (Manifest, Vec<u8>) {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let d = PpoPolicy::obs_dim_for(pl);
    let mut dense = |i: usize, o: usize| Dense {
        in_dim: i,
        out_dim: o,
        weight: (0..i * o).map(|_| next() / (i as f32).sqrt()).collect(),
        bias: vec![0.0; o],
    };
    let mut layers = Vec::new();
    let mut w = d;
    for &h in hidden {
        layers.push(dense(w, h as usize));
        w = h as usize;
    }
    let a = pl.symbols.len();
    let head = dense(w, a);
    let norm = ObsNorm { mean: vec![0.0; d], var: vec![1.0; d], eps: 1e-8, clip: 10.0 };
    let p = MlpPolicy { norm: Some(norm), hidden: layers, activation: act, head, squash: Squash::Clip(1.0) };
    let bytes = p.to_onnx("obs", "action", &[]).unwrap_or_default();
    // Made for the config's action space (as a trained model's manifest says it), so that it loads.
    let mut params = std::collections::BTreeMap::new();
    params.insert("env".to_string(), serde_json::json!({ "action": pl.action }));
    let m = Manifest {
        id: "ppo-synthetic".into(),
        params,
        ..Manifest::draft(
            ModelKind::Ppo,
            pl.features.clone(),
            vec![TensorSpec { name: "obs".into(), shape: vec![-1, d as i64] }],
            vec![TensorSpec { name: "action".into(), shape: vec![-1, a as i64] }],
            pl.symbols.clone(),
            Timeframe::DAY1,
        )
    };
    (m, bytes)
}

/// Runs the bench on `config` (the one `b.config` names, loaded by the caller).
pub fn infer(config: &Config, b: InferBench) -> anyhow::Result<ExitCode> {
    crate::runtime_libs::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let store = Store::open(&config.state_dir).context("opening the store")?;
    crate::data::ensure_bars(config, &store)?;
    let symbols = config.market.symbols.clone();
    let (from, to) = crate::data::day_window(None, None);
    let bars = crate::backtest::aligned_bars(&store, &symbols, config.market.timeframe, from, to)?;
    let days = bars.first().map_or(0, |b| b.len());
    let warm = config.features.warmup();
    if days <= warm {
        bail!(
            "only {days} bars common to {}: at least {} are needed; import more data",
            crate::domain::symbol_list(&symbols),
            warm + 1
        );
    }
    let pl = Pipeline::new(&config.features, &symbols, config.market.timeframe).with_action(config.env.action);
    let opts = SessionOptions { intra_threads: b.threads };
    let (manifest, bytes) = model(config, &b, &pl, opts)?;
    let load = || PpoPolicy::from_parts(manifest.clone(), &bytes, &pl, opts);
    let model_id = manifest.id.clone();
    let obs_len = PpoPolicy::obs_dim_for(&pl);
    let mem = memory_passes(config, &bars, warm, &load, b.decisions)?;
    let (mut lat, mut quiet, seen_obs, orders) = (mem.lat, mem.quiet, mem.obs, mem.orders);
    // The same decisions over an account on disk, as the live engine writes them: the flushes apart.
    let durable = durable_pass(config, &bars, warm, load()?, b.decisions)?;
    let flush_mean = durable.flushes.iter().sum::<u64>() as f64 / durable.flushes.len().max(1) as f64;
    let flush_max = durable.flushes.iter().copied().max().unwrap_or(0);
    let mut durable_lat = durable.lat;
    let mut infer_only = inference_alone(&mut load()?, &seen_obs, obs_len, b.decisions, symbols.len())?;
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() { f64::NAN } else { v[((v.len() - 1) as f64 * p).round() as usize] }
    };
    let (p50, p99) = (pct(&mut lat, 0.50), pct(&mut lat, 0.99));
    let (i50, i99) = (pct(&mut infer_only, 0.50), pct(&mut infer_only, 0.99));
    let (q50, q99) = (pct(&mut quiet, 0.50), pct(&mut quiet, 0.99));
    let (d50, d99) = (pct(&mut durable_lat, 0.50), pct(&mut durable_lat, 0.99));
    if let Some(dir) = &b.export {
        export(dir, &bytes, &seen_obs)?;
    }
    let a = symbols.len();
    if b.json {
        outln!(
            "{}",
            serde_json::json!({
                "bench": "infer", "model": model_id, "obs_dim": obs_len, "assets": a,
                "decisions": lat.len(), "threads": b.threads, "orders_sent": orders,
                "decision_p50_us": p50, "decision_p99_us": p99,
                "decisions_without_orders": quiet.len(),
                "no_order_decision_p50_us": q50, "no_order_decision_p99_us": q99,
                "inference_p50_us": i50, "inference_p99_us": i99,
                "durable_decisions": durable_lat.len(),
                "durable_decision_p50_us": d50, "durable_decision_p99_us": d99,
                "durable_flushes_per_close_mean": flush_mean, "durable_flushes_per_close_max": flush_max,
            })
        )?;
    } else {
        outln!("model {model_id} (obs {obs_len} wide, {a} assets), {} decisions, {} thread(s)", lat.len(), b.threads)?;
        outln!(
            "decision compute (the engine over an account in memory: features + inference + strategy + risk + order records): p50 {p50:.1} µs, p99 {p99:.1} µs; {orders} orders sent"
        )?;
        outln!(
            "the {} decisions that sent no order (no order record written): p50 {q50:.1} µs, p99 {q99:.1} µs",
            quiet.len()
        )?;
        outln!(
            "with durable writes (the same engine over an account on disk, {} decisions): p50 {d50:.1} µs, p99 {d99:.1} µs; durable flushes per close: mean {flush_mean:.2}, max {flush_max}",
            durable_lat.len()
        )?;
        outln!("inference alone (call after call over the engine's observations): p50 {i50:.1} µs, p99 {i99:.1} µs")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The model to time: the selected one, or a synthetic one of the config's shape when there is no
/// champion to take.
fn model(config: &Config, b: &InferBench, pl: &Pipeline, opts: SessionOptions) -> anyhow::Result<(Manifest, Vec<u8>)> {
    let reg = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    let sel = ModelSel::parse(b.model.as_deref());
    if matches!(sel, ModelSel::Champion) && reg.champion(ModelKind::Ppo)?.is_none() {
        return Ok(synthetic(pl, &config.ppo.hidden, config.ppo.activation));
    }
    let id = PpoPolicy::load(&reg, &sel, pl, opts)?.id().to_string();
    Ok(reg.load(&id)?)
}

/// Inference alone, as the Python peer times it: one call after another over the engine's observations
/// (`n` calls, in µs).
fn inference_alone(
    policy: &mut PpoPolicy,
    seen_obs: &[f32],
    obs_len: usize,
    n: usize,
    assets: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut act = vec![0.0f32; assets];
    let mut out = Vec::with_capacity(n);
    for obs in seen_obs.chunks(obs_len).cycle().take(n) {
        let t = Instant::now();
        policy.act_into(obs, &mut act)?;
        out.push(t.elapsed().as_nanos() as f64 / 1e3);
    }
    Ok(out)
}

/// `--export`: the model and the observations it was timed on, for the Python peer.
fn export(dir: &std::path::Path, bytes: &[u8], seen_obs: &[f32]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("model.onnx"), bytes).context("writing model.onnx")?;
    let raw: Vec<u8> = seen_obs.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("obs.bin"), raw).context("writing obs.bin")?;
    Ok(())
}

/// The decisions timed over accounts in memory (orders, kill switch, decisions: a store begun afresh for
/// each pass, so that the figure is the engine's compute, with no file written and no flush). Passes over
/// the bars repeat until `decisions` are timed; decisions that sent no order (no order record written,
/// the rest of the path is) are also kept apart.
fn memory_passes(
    config: &Config,
    bars: &[Vec<crate::domain::Bar>],
    warm: usize,
    load: &dyn Fn() -> Result<PpoPolicy, crate::policy::PolicyError>,
    decisions: usize,
) -> anyhow::Result<Timing> {
    let mut all = Timing::default();
    loop {
        let account = Store::in_memory().context("opening the bench's account in memory")?;
        let mut session = SimSession::open(config, StrategyMode::Ppo, &account, (Some(load()?), None), bars[0][0].t)?;
        let mut timing = Timing { warm, wanted: decisions - all.lat.len(), flushes: None, ..Timing::default() };
        let flow = session.drive(bars, &[], &mut timing)?;
        all.orders += timing.orders;
        all.lat.extend(timing.lat);
        all.quiet.extend(timing.quiet);
        let obs_len = session.engine().observation().len().max(1);
        if all.obs.len() < 1000 * obs_len {
            all.obs.extend(timing.obs);
        }
        if flow == Flow::Stop || all.lat.len() >= decisions || bars.first().is_none_or(|b| b.is_empty()) {
            return Ok(all);
        }
    }
}

/// The decisions of one pass over an account on disk: each close's time and its durable flushes.
struct Durable {
    lat: Vec<f64>,
    flushes: Vec<u64>,
}

/// Times up to `closes` decisions (after the warm-up) over a fresh account on disk under the state
/// directory (`bench-infer`, removed before and after), counting each close's durable flushes.
fn durable_pass(
    config: &Config,
    bars: &[Vec<crate::domain::Bar>],
    warm: usize,
    policy: PpoPolicy,
    closes: usize,
) -> anyhow::Result<Durable> {
    let dir = config.state_dir.join("bench-infer");
    remove_account(&dir)?;
    let mut out = Durable { lat: Vec::new(), flushes: Vec::new() };
    {
        let account = Store::open(&dir).context("opening the bench's account on disk")?;
        let mut session = SimSession::open(config, StrategyMode::Ppo, &account, (Some(policy), None), bars[0][0].t)?;
        let mut timing = Timing { warm, wanted: closes, flushes: Some((account.clone(), 0)), ..Timing::default() };
        session.drive(bars, &[], &mut timing)?;
        out.lat = timing.lat;
        out.flushes = timing.durable;
    }
    remove_account(&dir)?;
    Ok(out)
}

fn remove_account(dir: &std::path::Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing the bench's account {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// The bench's view of the run loop: each moment's decision time (its bars through the engine) from bar
/// `warm` on, until `wanted` are timed; with an account on disk (`flushes`), the durable flushes of each.
#[derive(Default)]
struct Timing {
    warm: usize,
    wanted: usize,
    took: std::time::Duration,
    sent: usize,
    orders: usize,
    lat: Vec<f64>,
    quiet: Vec<f64>,
    obs: Vec<f32>,
    flushes: Option<(Store, u64)>,
    durable: Vec<u64>,
}

impl<'a> Hooks<Engine, SimVenue<'a>> for Timing {
    fn on_close(&mut self, _: &mut Engine, _: &SimVenue<'a>, _: &Moment) {
        (self.took, self.sent) = (std::time::Duration::ZERO, 0);
        if let Some((account, before)) = self.flushes.as_mut() {
            *before = account.durable_flushes();
        }
    }

    fn on_bar(&mut self, _: &mut Engine, _: &crate::domain::Bar, orders: usize, took: std::time::Duration) {
        self.took += took;
        self.sent += orders;
    }

    fn after_moment(&mut self, core: &mut Engine, _: &SimVenue<'a>, m: &Moment) -> (Vec<Command>, Flow) {
        if m.index < self.warm {
            return (Vec::new(), Flow::Go);
        }
        let us = self.took.as_nanos() as f64 / 1e3;
        self.orders += self.sent;
        self.lat.push(us);
        if self.sent == 0 {
            self.quiet.push(us);
        }
        if let Some((account, before)) = &self.flushes {
            self.durable.push(account.durable_flushes() - before);
        } else if self.obs.len() < 1000 * core.observation().len().max(1) {
            self.obs.extend_from_slice(core.observation());
        }
        (Vec::new(), if self.lat.len() >= self.wanted { Flow::Stop } else { Flow::Go })
    }
}

impl SessionHooks<'_> for Timing {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::ActionSpace;

    /// The stand-in model is made in the config's action space: the demo config's target weights load it
    /// (`make bench-infer` on a fresh machine), as share counts do.
    #[test]
    fn the_stand_in_model_loads_in_the_configs_action_space() {
        let symbols: Vec<_> = ["AAPL", "MSFT", "IBM"].map(|s| crate::domain::Symbol::new(s).unwrap()).to_vec();
        let shares = Pipeline::new(&crate::features::FeatureSpec::default(), &symbols, Timeframe::DAY1);
        for action in [ActionSpace::Shares, ActionSpace::Weights { band: 0.1, max_weight: 0.4 }] {
            let pl = shares.clone().with_action(action);
            let (m, bytes) = synthetic(&pl, &[8, 8], Activation::Tanh);
            assert_eq!(crate::policy::manifest_action_space(&m), Ok(action));
            let p = PpoPolicy::from_parts(m, &bytes, &pl, SessionOptions::default());
            assert!(p.is_ok(), "{action:?}: {:?}", p.err().map(|e| e.to_string()));
        }
    }
}
