//! The LSTM training job (`tradebot train lstm`, feature `train`): the direction classifier on the stored
//! bars of the `[train]` range, reaching back `lstm.history_days` before its end. Every configured
//! symbol's samples (`features::windows`) are pooled, the window sized to them (`lstm_sizing`), and
//! split by time (70 % train, 15 % validation, 15 % test, `horizon` bars left out between parts); training
//! runs with early stopping on validation MCC, checkpoints under `state_dir/checkpoints/lstm/`; the best
//! model is exported to ONNX, checked against tch through ONNX Runtime (1e-5) and registered as a
//! candidate.

use super::lstm_sizing::{self, NotEnoughData};
use super::progress::LstmProgress;
use super::{LstmJob, pick_device};
use crate::config::{Config, LstmConfig};
use crate::domain::Bar;
use crate::engine::cutoffs::{self, Sample};
use crate::features::windows::{self, WindowSpec, context_names};
use crate::lstm::dataset::{DatasetSpec, WindowDataset};
use crate::lstm::model::NetDims;
use crate::lstm::train::LstmTrainer;
use crate::models::{FeatureRef, Manifest, ModelKind, Registry, TensorSpec};
use crate::out::outln;
use anyhow::{Context, bail};
use chrono::NaiveDate;
use serde_json::json;
use std::collections::BTreeMap;
use tch::{Device, Kind, Tensor};

const TRAIN_FRAC: f64 = 0.7;
const VALID_FRAC: f64 = 0.15;
/// Fewest training samples worth a model.
const MIN_TRAIN_SAMPLES: usize = 200;
/// Largest tch / ONNX Runtime difference in probabilities accepted before registering.
const PARITY_TOL: f32 = 1e-5;

/// Trains, exports, checks and registers; returns the candidate's model id.
pub(crate) fn run(job: LstmJob) -> anyhow::Result<String> {
    train(job)
}

/// All symbols' samples pooled: panels concatenated, indices offset, sample times for the split.
pub(crate) struct Pooled {
    pub spec: DatasetSpec,
    pub times: Vec<i64>,
    /// Per sample: the index of its symbol in `market.symbols`, and the return a position taken on its
    /// decision earns (from the fill at the next close to the close after).
    pub symbol: Vec<u32>,
    pub next_return: Vec<f64>,
}

/// Each configured symbol's bars (in `market.symbols` order) from `first_day` to the end of `[train]`
/// (resolved), from the store or from the dataset snapshot named by
/// `$TRADEBOT_TRAIN_SNAPSHOT` (the daemon's retrain, which holds the store's lock).
pub(crate) fn bars_from_env(config: &Config, first_day: Option<NaiveDate>) -> anyhow::Result<Vec<Vec<Bar>>> {
    let (from, to) = crate::data::day_window(first_day, config.train.train_end());
    if let Some(path) = std::env::var_os(crate::retrain::pipeline::SNAPSHOT_ENV) {
        let path = std::path::PathBuf::from(path);
        let snap = crate::data::snapshot::Snapshot::read(&path)
            .with_context(|| format!("reading the dataset snapshot {}", path.display()))?;
        return config
            .market
            .symbols
            .iter()
            .map(|sym| {
                let Some((_, bars)) = snap.series.iter().find(|(s, _)| s == sym) else {
                    bail!(
                        "snapshot {} has no bars for {sym}; it must hold every symbol of market.symbols",
                        path.display()
                    );
                };
                Ok(bars.iter().filter(|b| b.t >= from && b.t <= to).cloned().collect())
            })
            .collect();
    }
    let store = crate::control::beside::open_or_snapshot(&config.state_dir).context("opening the store")?;
    crate::data::ensure_bars(config, &store)?;
    let symbols = &config.market.symbols;
    symbols.iter().map(|sym| Ok(store.bars(sym, config.market.timeframe, from, to)?)).collect()
}

/// All symbols' samples under window `w`, pooled: panels concatenated, indices offset.
pub(crate) fn pooled_dataset(config: &Config, w: &WindowSpec, series: &[Vec<Bar>]) -> Pooled {
    let fspec = &config.features;
    let (nf, nc) = (fspec.n_cols(), context_names(fspec).len());
    let mut s = DatasetSpec {
        fast: vec![],
        fast_dim: nf,
        slow: vec![],
        slow_dim: nf,
        context: vec![],
        context_dim: nc,
        fast_len: w.fast_len,
        slow_len: w.slow_len,
        fast_end: vec![],
        slow_end: vec![],
        context_row: vec![],
        labels: vec![],
    };
    let (mut times, mut symbol, mut next_return) = (Vec::new(), Vec::new(), Vec::new());
    for (si, (sym, bars)) in config.market.symbols.iter().zip(series).enumerate() {
        let sw = windows::build(fspec, w, bars);
        let (f0, s0) = ((s.fast.len() / nf) as i64, (s.slow.len() / nf) as i64);
        let mut n = 0;
        for k in 0..sw.bar.len() {
            let Some(label) = sw.label[k] else { continue };
            s.fast_end.push(f0 + sw.bar[k] as i64);
            s.slow_end.push(s0 + sw.slow_end[k] as i64);
            s.context_row.push(f0 + sw.bar[k] as i64);
            s.labels.push(label);
            let b = sw.bar[k];
            times.push(bars[b].t.timestamp_micros());
            symbol.push(si as u32);
            // A decision at this close fills at the next bar's close (the engine's and the env's timing):
            // its position earns the bar after that.
            next_return.push(match (bars.get(b + 1), bars.get(b + 2)) {
                (Some(fill), Some(after)) if fill.c > 0.0 => after.c / fill.c - 1.0,
                _ => 0.0,
            });
            n += 1;
        }
        log::info!("{sym}: {} bars, {n} labelled samples", bars.len());
        s.fast.extend(sw.fast);
        s.slow.extend(sw.slow);
        s.context.extend(sw.context);
    }
    Pooled { spec: s, times, symbol, next_return }
}

/// The config of the job: `[train]`'s dates resolved, the retrain's seed and `--epochs` applied; and the
/// first day of its data (`LstmConfig::history_from`).
fn job_config(args: &LstmJob) -> anyhow::Result<(Config, LstmConfig, Option<NaiveDate>)> {
    let (config, seed) = super::dated_config(&args.config)?;
    let first_day = config.lstm.history_from(&args.config.train, &config.train);
    let mut cfg = config.lstm.clone();
    if let Some(seed) = seed {
        log::info!("seed {seed} (the retrain's, in place of lstm.seed)");
        cfg.seed = seed;
    }
    if let Some(e) = args.epochs {
        if e == 0 {
            bail!("--epochs 0: train at least 1 epoch");
        }
        cfg.max_epochs = e;
    }
    Ok((config, cfg, first_day))
}

/// The window sized to the bars (`lstm_sizing::size`), said once when it is not the configured one, or
/// why there is too little data even at the sizing's bounds.
fn sized_window(config: &Config, cfg: &LstmConfig, series: &[Vec<Bar>]) -> Result<WindowSpec, NotEnoughData> {
    let counts: Vec<usize> = series.iter().map(Vec::len).collect();
    let w = lstm_sizing::size(cfg, &config.features, &counts);
    let samples = lstm_sizing::pooled(&config.features, &w, &counts);
    if samples < lstm_sizing::MIN_SAMPLES {
        return Err(not_enough(cfg, series, samples, lstm_sizing::MIN_SAMPLES));
    }
    let c = cfg.window_spec();
    if w != c {
        log::info!(
            "the LSTM's window is sized to its data: {samples} labelled samples over {} symbols at slow_len {}, slow_factor {}, horizon {} (configured {}, {}, {}: {} samples; lstm.target_samples = {})",
            series.len(),
            w.slow_len,
            w.slow_factor,
            w.horizon,
            c.slow_len,
            c.slow_factor,
            c.horizon,
            lstm_sizing::pooled(&config.features, &c, &counts),
            cfg.target_samples
        );
    }
    Ok(w)
}

fn not_enough(cfg: &LstmConfig, series: &[Vec<Bar>], samples: usize, need: usize) -> NotEnoughData {
    let first = series.iter().filter_map(|b| b.first().map(|b| b.t)).min();
    let last = series.iter().filter_map(|b| b.last().map(|b| b.t)).max();
    let days = match (first, last) {
        (Some(a), Some(b)) => (b - a).num_days(),
        _ => 0,
    };
    NotEnoughData { samples, per_symbol: samples / series.len().max(1), days, need, history_days: cfg.history_days }
}

fn train(args: LstmJob) -> anyhow::Result<String> {
    let (config, cfg, first_day) = job_config(&args)?;
    let device = pick_device(&args.device)?;
    let series = bars_from_env(&config, first_day)?;
    let w = sized_window(&config, &cfg, &series)?;
    let pooled = pooled_dataset(&config, &w, &series);
    let split = windows::time_split(&pooled.times, TRAIN_FRAC, VALID_FRAC, w.horizon);
    let (tr, va, te) = &split;
    if tr.len() < MIN_TRAIN_SAMPLES || va.is_empty() || te.is_empty() {
        // The pooled count that would give MIN_TRAIN_SAMPLES at this split.
        let n = pooled.times.len();
        let need = (n * MIN_TRAIN_SAMPLES).div_ceil(tr.len().max(1)).max(n + 1);
        return Err(not_enough(&cfg, &series, n, need).into());
    }
    let dims = NetDims {
        fast_dim: pooled.spec.fast_dim,
        fast_len: w.fast_len,
        slow_dim: pooled.spec.slow_dim,
        slow_len: w.slow_len,
        context_dim: pooled.spec.context_dim,
    };
    let (times, symbol, next_return) = (pooled.times, pooled.symbol, pooled.next_return);
    let ds = WindowDataset::new(pooled.spec, device).context("building the dataset")?;
    let mut trainer = LstmTrainer::new(cfg.clone(), dims, device)?;
    let mut metrics = fit(&args, &config, &mut trainer, &ds, &split, device)?;
    let net = trainer.net.export(&trainer.vs)?;
    let onnx = net.to_onnx(&[("kind", "lstm"), ("features", &config.features.fingerprint())])?;
    let max_diff = parity(&trainer, &onnx, &config, dims)?;
    if max_diff > PARITY_TOL {
        bail!("the exported ONNX model differs from tch by {max_diff} (> {PARITY_TOL}); not registered");
    }
    metrics.insert("parity_max_abs_diff".to_string(), max_diff as f64);
    // The strategy's cut-offs, chosen on the validation split by the strategy's own rule.
    let val_probs = trainer.probs(&ds, va)?;
    let samples: Vec<Sample> = va
        .iter()
        .zip(&val_probs)
        .map(|(&i, p)| {
            let i = i as usize;
            Sample { symbol: symbol[i], t: times[i], p_down: p[0], p_up: p[2], next_return: next_return[i] }
        })
        .collect();
    let choice = choose_cutoffs(&config, &cfg, &samples, &mut metrics);
    let mut manifest = manifest(&config, &cfg, &w, dims, metrics.clone());
    if let Some(c) = choice {
        // On the grid's 0.02 steps: 0.36, not f32's 0.3599999845.
        let two_places = |v: f32| (f64::from(v) * 100.0).round() / 100.0;
        manifest.params.insert(cutoffs::UP_PARAM.into(), json!(two_places(c.up)));
        manifest.params.insert(cutoffs::DOWN_PARAM.into(), json!(two_places(c.down)));
    }
    register(&args, &config, &onnx, manifest, &metrics)
}

/// Trains with early stopping (resuming when asked), then evaluates the best epoch: its metrics.
fn fit(
    args: &LstmJob,
    config: &Config,
    trainer: &mut LstmTrainer,
    ds: &WindowDataset,
    (tr, va, te): &(Vec<i64>, Vec<i64>, Vec<i64>),
    device: Device,
) -> anyhow::Result<BTreeMap<String, f64>> {
    let ck_dir = config.state_dir.join("checkpoints/lstm");
    if args.resume {
        trainer.resume(&ck_dir).context("resuming (drop --resume to start afresh)")?;
    }
    let out = LstmProgress::new(args.json, trainer.cfg.max_epochs, trainer.epoch).with_gpu(device);
    out.start(&device, tr.len(), va.len(), te.len());
    let history = trainer.fit(ds, tr, va, Some(&ck_dir), |s| {
        out.epoch(s, tr.len());
        true
    })?;
    out.finish();
    let (best_epoch, best_mcc) = trainer.best().unwrap_or((0, 0.0));
    let (test_loss, test) = trainer.evaluate(ds, te, None)?;
    let (val_loss, val) = trainer.evaluate(ds, va, None)?;
    let mut metrics = BTreeMap::from([
        ("val_mcc".to_string(), val.mcc()),
        ("val_accuracy".to_string(), val.accuracy()),
        ("val_macro_f1".to_string(), val.macro_f1()),
        ("val_loss".to_string(), val_loss),
        ("test_mcc".to_string(), test.mcc()),
        ("test_accuracy".to_string(), test.accuracy()),
        ("test_macro_f1".to_string(), test.macro_f1()),
        ("test_loss".to_string(), test_loss),
        ("best_epoch".to_string(), best_epoch as f64),
        ("epochs".to_string(), trainer.epoch as f64),
        ("train_samples".to_string(), tr.len() as f64),
    ]);
    if let Some(last) = history.last() {
        metrics.insert("samples_per_sec".into(), last.samples_per_sec);
    }
    log::info!("best epoch {best_epoch}, validation MCC {best_mcc:.4}");
    Ok(metrics)
}

/// The strategy's cut-offs chosen on the validation samples, asking for `LstmConfig::min_entries` of
/// them (fewer than `cutoff_min_entries` on a small split); said in the log and the metrics.
fn choose_cutoffs(
    config: &Config,
    cfg: &LstmConfig,
    samples: &[Sample],
    metrics: &mut BTreeMap<String, f64>,
) -> Option<cutoffs::Choice> {
    let cost = (config.env.exec.fee_bps + config.env.exec.slippage_bps) / 1e4;
    let min_entries = cfg.min_entries(samples.len());
    let choice = cutoffs::choose(samples, cost, cfg.cutoff_metric, min_entries);
    match &choice {
        Some(c) => {
            log::info!(
                "strategy cut-offs chosen on validation: long at P(up) >= {:.2}, flat at P(down) >= {:.2} ({} {:.4}, {} entries of the {min_entries} asked of {} samples)",
                c.up,
                c.down,
                cfg.cutoff_metric,
                c.metric,
                c.entries,
                samples.len()
            );
            if c.metric <= 0.0 {
                log::warn!(
                    "no cut-off pair earned anything on the validation split after fees (best {} {:.4}): the model shows no edge there; the promotion gate decides on the holdout",
                    cfg.cutoff_metric,
                    c.metric
                );
            }
            metrics.insert(format!("val_cutoff_{}", cfg.cutoff_metric), c.metric);
            metrics.insert("val_cutoff_entries".into(), c.entries as f64);
        }
        None => log::warn!(
            "no probability cut-off pair entered a position {min_entries} times on the validation split's {} samples: the model carries none, and trades on strategy.up_threshold / down_threshold or {}",
            samples.len(),
            crate::config::DEFAULT_CUTOFF
        ),
    }
    choice
}

/// Registers the candidate and says so (a `done` line with `--json`).
fn register(
    args: &LstmJob,
    config: &Config,
    onnx: &[u8],
    manifest: Manifest,
    metrics: &BTreeMap<String, f64>,
) -> anyhow::Result<String> {
    let reg = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    let m = reg.add(onnx, manifest).context("registering the model")?;
    if args.json {
        outln!("{}", json!({"event": "done", "model_id": m.id, "metrics": metrics}))?;
    } else {
        let get = |k: &str| metrics.get(k).copied().unwrap_or(f64::NAN);
        outln!(
            "registered {} (candidate): validation MCC {:.4}, test MCC {:.4}, best epoch {}",
            m.id,
            get("val_mcc"),
            get("test_mcc"),
            get("best_epoch")
        )?;
    }
    Ok(m.id)
}

/// Largest |tch - ONNX Runtime| over probabilities of 256 random inputs.
fn parity(t: &LstmTrainer, onnx: &[u8], config: &Config, d: NetDims) -> anyhow::Result<f32> {
    let rt = crate::runtime_libs::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let mut s = ort::session::Session::builder(&rt.env)?.commit_from_memory(onnx)?;
    let n = 256i64;
    let cpu = (Kind::Float, Device::Cpu);
    let (xf, xs, xc) = (
        Tensor::randn([n, d.fast_len as i64, d.fast_dim as i64], cpu),
        Tensor::randn([n, d.slow_len as i64, d.slow_dim as i64], cpu),
        Tensor::randn([n, d.context_dim as i64], cpu),
    );
    let dev = t.vs.device();
    let want = tch::no_grad(|| t.net.probs(&xf.to_device(dev), &xs.to_device(dev), &xc.to_device(dev)));
    let want = Vec::<f32>::try_from(want.to_device(Device::Cpu).reshape([-1]))?;
    let arr = |x: &Tensor| -> anyhow::Result<ndarray::ArrayD<f32>> {
        let shape: Vec<usize> = x.size().iter().map(|&v| v as usize).collect();
        Ok(ndarray::ArrayD::from_shape_vec(shape, Vec::<f32>::try_from(x.reshape([-1]))?)?)
    };
    let (af, as_, ac) = (arr(&xf)?, arr(&xs)?, arr(&xc)?);
    let out = s.run(ort::inputs![
        "x_fast" => ort::value::TensorRef::from_array_view(af.view())?,
        "x_slow" => ort::value::TensorRef::from_array_view(as_.view())?,
        "x_context" => ort::value::TensorRef::from_array_view(ac.view())?,
    ])?;
    let got = out["probs"].try_extract_array::<f32>()?;
    Ok(got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max))
}

fn manifest(config: &Config, cfg: &LstmConfig, w: &WindowSpec, d: NetDims, metrics: BTreeMap<String, f64>) -> Manifest {
    let fspec = &config.features;
    let params = BTreeMap::from([
        ("fast_len".to_string(), json!(w.fast_len)),
        ("slow_len".to_string(), json!(w.slow_len)),
        ("slow_factor".to_string(), json!(w.slow_factor)),
        ("horizon".to_string(), json!(w.horizon)),
        ("up_threshold".to_string(), json!(w.up_threshold)),
        ("down_threshold".to_string(), json!(w.down_threshold)),
        ("context".to_string(), json!(context_names(fspec))),
        ("classes".to_string(), json!(["down", "flat", "up"])),
        ("feature_spec".to_string(), serde_json::to_value(fspec).unwrap_or_default()),
        ("lstm".to_string(), serde_json::to_value(cfg).unwrap_or_default()),
    ]);
    let inputs = vec![
        TensorSpec { name: "x_fast".into(), shape: vec![-1, d.fast_len as i64, d.fast_dim as i64] },
        TensorSpec { name: "x_slow".into(), shape: vec![-1, d.slow_len as i64, d.slow_dim as i64] },
        TensorSpec { name: "x_context".into(), shape: vec![-1, d.context_dim as i64] },
    ];
    let outputs = vec![TensorSpec { name: "probs".into(), shape: vec![-1, 3] }];
    let features = FeatureRef { version: crate::features::FEATURE_VERSION, names: fspec.names() };
    let symbols = config.market.symbols.clone();
    Manifest {
        train_from: config.train.from,
        train_to: config.train.train_end(),
        holdout_from: config.train.holdout_from,
        holdout_to: config.train.holdout_to,
        metrics,
        params,
        ..Manifest::draft(ModelKind::Lstm, features, inputs, outputs, symbols, config.market.timeframe)
    }
}
