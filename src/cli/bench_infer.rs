//! `tradebot bench infer`: per-decision latency of the engine's decision path on one thread — streaming
//! features for every symbol, the PPO observation, ONNX inference, the strategy's orders, the risk checks
//! (`risk::RiskChecks`, as the daemon runs them) — over the stored bars of the configured symbols, for the
//! champion PPO model (or `--model`, or with neither a random model of `[ppo].hidden`, said so in the
//! output). p50 and p99 in µs.
//! `--export DIR` writes the ONNX file and the observations (`obs.bin`, f32 little-endian, `obs_dim`
//! wide) so `benches/peers/ort_python.py` can time onnxruntime's Python API on the same work.

use super::load_config;
use crate::domain::{ClientOrderId, OrderRequest, OrderTif, Qty, Timeframe};
use crate::engine::strategy::from_action;
use crate::features::FeatureState;
use crate::models::{Manifest, ModelKind, Registry, TensorSpec};
use crate::onnx::mlp::{MlpPolicy, ObsNorm};
use crate::onnx::{Activation, Dense};
use crate::policy::{ModelSel, Pipeline, PpoPolicy, SessionOptions};
use crate::store::Store;
use anyhow::{Context, bail};
use rust_decimal::Decimal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Clone, clap::Args)]
pub struct InferBench {
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// A PPO model id; default: the registry's champion.
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
    #[arg(long)]
    pub json: bool,
}

/// A random (untrained) PPO model of the configured sizes, for machines without a champion yet.
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
    let p = MlpPolicy { norm: Some(norm), hidden: layers, activation: act, head, action_clip: Some(1.0) };
    let bytes = p.to_onnx("obs", "action", &[]).unwrap_or_default();
    let m = Manifest {
        id: "ppo-synthetic".into(),
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

// Bars, rows and states are indexed together by symbol and day; iterators would hide that.
#[allow(clippy::needless_range_loop)]
pub fn infer(b: InferBench) -> anyhow::Result<ExitCode> {
    let config = load_config(b.config.clone())?;
    crate::native::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let store = Store::open(&config.state_dir).context("opening the store")?;
    crate::data::ensure_bars(&config, &store)?;
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
    let pl = Pipeline::new(&config.features, &symbols, config.market.timeframe);
    let opts = SessionOptions { intra_threads: b.threads };
    let reg = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    let sel = ModelSel::parse(b.model.as_deref());
    let (mut policy, bytes) = match (&sel, reg.champion(ModelKind::Ppo)?) {
        (ModelSel::Champion, None) => {
            let (m, bytes) = synthetic(&pl, &config.ppo.hidden, config.ppo.activation);
            (PpoPolicy::from_parts(m, &bytes, &pl, opts)?, bytes)
        }
        _ => {
            let p = PpoPolicy::load(&reg, &sel, &pl, opts)?;
            let bytes = reg.load(p.id())?.1;
            (p, bytes)
        }
    };
    let exec = config.env.exec;
    let ic = config.env.initial_cash;
    // The daemon's full risk checks (limits, kill switch, stale bars, hours, asset rules), as the engine runs
    // them; the clock is each bar's own time, so stale-bar checks pass as they would live.
    let checks = crate::risk::RiskChecks::open(&config.risk, &exec, &store).context("opening the risk checks")?;
    let assets = std::collections::HashMap::new();
    let (a, f) = (symbols.len(), config.features.n_cols());
    let mut obs = vec![0.0f32; 1 + a * (1 + f)];
    let mut act = vec![0.0f32; a];
    let mut rows = vec![vec![0.0f32; f]; a];
    let mut lat = Vec::with_capacity(b.decisions);
    let mut infer_only = Vec::with_capacity(b.decisions);
    let mut seen_obs: Vec<f32> = Vec::new();
    let mut orders = 0usize;
    'outer: loop {
        let mut states: Vec<FeatureState> = (0..a).map(|_| FeatureState::new(config.features.clone())).collect();
        let holdings = vec![10.0f64; a];
        for d in 0..days {
            let t0 = Instant::now();
            let mut ready = true;
            for k in 0..a {
                let x = &bars[k][d];
                ready &= states[k].update_into(x.o, x.h, x.l, x.c, x.v, &mut rows[k]);
            }
            if !ready {
                continue;
            }
            obs[0] = 0.5;
            for k in 0..a {
                let base = 1 + k * (1 + f);
                obs[base] = (holdings[k] * f64::from(bars[k][d].c as f32) / ic) as f32;
                obs[base + 1..base + 1 + f].copy_from_slice(&rows[k]);
            }
            let t1 = Instant::now();
            policy.act_into(&obs, &mut act)?;
            let t2 = Instant::now();
            let mut positions = std::collections::BTreeMap::new();
            let mut held_value = 0.0;
            for k in 0..a {
                let price = f64::from(bars[k][d].c as f32);
                held_value += holdings[k] * price;
                let qty = Decimal::from_f64_retain(holdings[k]).unwrap_or_default();
                positions.insert(symbols[k].clone(), crate::risk::Holding { qty, price });
            }
            let ctx = crate::risk::RiskContext {
                equity: Decimal::from_f64_retain(ic * 0.5 + held_value).unwrap_or_default(),
                cash: Decimal::from_f64_retain(ic * 0.5).unwrap_or_default(),
                positions: &positions,
                bar_time: bars[0][d].t,
                timeframe: config.market.timeframe,
                now: bars[0][d].t,
                inputs_finite: obs.iter().all(|v| v.is_finite()),
                assets: &assets,
            };
            for k in 0..a {
                if let Some(w) = from_action(&exec, act[k], holdings[k])
                    && let Some(q) = Decimal::from_f64_retain(w.qty).and_then(|q| Qty::new(q).ok())
                {
                    let req = OrderRequest {
                        client_order_id: ClientOrderId::derive("bench", &symbols[k], bars[k][d].t, k as u16),
                        symbol: symbols[k].clone(),
                        side: w.side,
                        qty: q,
                        tif: OrderTif::Day,
                        bar_time: bars[k][d].t,
                        ref_price: bars[k][d].c,
                    };
                    orders += usize::from(checks.check(req, &ctx).is_ok());
                }
            }
            lat.push(t0.elapsed().as_nanos() as f64 / 1e3);
            infer_only.push((t2 - t1).as_nanos() as f64 / 1e3);
            if seen_obs.len() < 1000 * obs.len() {
                seen_obs.extend_from_slice(&obs);
            }
            if lat.len() >= b.decisions {
                break 'outer;
            }
        }
    }
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    let (p50, p99) = (pct(&mut lat, 0.50), pct(&mut lat, 0.99));
    let (i50, i99) = (pct(&mut infer_only, 0.50), pct(&mut infer_only, 0.99));
    if let Some(dir) = &b.export {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("model.onnx"), &bytes).context("writing model.onnx")?;
        let raw: Vec<u8> = seen_obs.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(dir.join("obs.bin"), raw).context("writing obs.bin")?;
    }
    if b.json {
        println!(
            "{}",
            serde_json::json!({
                "bench": "infer", "model": policy.id(), "obs_dim": obs.len(), "assets": a,
                "decisions": lat.len(), "threads": b.threads, "orders_approved": orders,
                "decision_p50_us": p50, "decision_p99_us": p99,
                "inference_p50_us": i50, "inference_p99_us": i99,
            })
        );
    } else {
        println!(
            "model {} (obs {} wide, {a} assets), {} decisions, {} thread(s)",
            policy.id(),
            obs.len(),
            lat.len(),
            b.threads
        );
        println!("decision (features + inference + strategy + risk): p50 {p50:.1} µs, p99 {p99:.1} µs");
        println!("inference alone: p50 {i50:.1} µs, p99 {i99:.1} µs");
    }
    Ok(ExitCode::SUCCESS)
}
