//! `tradebot bench lstm`: training epochs of the LSTM classifier on synthetic data of the report's shape
//! (490k samples, batch 3072, about 26k parameters; fast window 30 x 17, slow window 10 x 17, context 5),
//! panels resident on the device and windows gathered by index. Prints epoch time and samples/s; `--dump
//! DIR` writes the same data for `benches/peers/lstm_torch.py`.

#[cfg(feature = "train")]
use crate::out::outln;
use std::path::PathBuf;

/// The arguments of `tradebot bench lstm`.
#[derive(Debug, Clone, clap::Args)]
pub struct LstmBench {
    /// Synthetic samples trained on in an epoch.
    #[arg(long, default_value_t = 490_000)]
    pub samples: usize,
    /// Epochs timed after one warm-up epoch; the figure is their mean.
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Samples per training batch.
    #[arg(long, default_value_t = 3072)]
    pub batch: usize,
    /// cpu | cuda
    #[arg(long, default_value = "cpu", value_parser = super::cpu_or_cuda)]
    pub device: crate::training::device::DeviceRequest,
    /// Write the synthetic data (raw little-endian arrays and meta.json) here for the PyTorch peer.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    /// The figures as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The benchmark's shape: window lengths and input widths (the default feature set's 17 columns).
#[cfg(feature = "train")]
const FAST_LEN: usize = 30;
#[cfg(feature = "train")]
const SLOW_LEN: usize = 10;
#[cfg(feature = "train")]
const FEATURES: usize = 17;
#[cfg(feature = "train")]
const CONTEXT: usize = 5;

/// `tradebot bench lstm` in a build without the `train` feature: an error saying it needs one.
#[cfg(not(feature = "train"))]
pub fn run(_: LstmBench) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("tradebot bench lstm needs a build with the `train` feature (libtorch)")
}

/// Runs `tradebot bench lstm`: trains the LSTM classifier on synthetic data and prints epoch time and samples/s.
#[cfg(feature = "train")]
pub fn run(b: LstmBench) -> anyhow::Result<std::process::ExitCode> {
    use crate::config::LstmConfig;
    use crate::lstm::dataset::{WindowDataset, synthetic};
    use crate::lstm::model::NetDims;
    use crate::lstm::train::LstmTrainer;
    use anyhow::{Context, bail};

    if b.samples < 2 * b.batch || b.epochs == 0 || b.batch < 2 {
        bail!("--samples must be at least twice --batch (>= 2), and --epochs at least 1");
    }
    let device = crate::training::pick_device(&b.device)?;
    let spec = synthetic(b.samples, FAST_LEN, FEATURES, SLOW_LEN, CONTEXT, 7);
    if let Some(dir) = &b.dump {
        dump(dir, &spec).with_context(|| format!("writing the benchmark data to {}", dir.display()))?;
    }
    let n = spec.labels.len();
    let ds = WindowDataset::new(spec, device)?;
    let cfg = LstmConfig {
        fast_hidden: 56,
        slow_hidden: 32,
        context_hidden: vec![16],
        head_hidden: vec![32],
        batch_size: b.batch,
        max_epochs: b.epochs + 1,
        // Never stops early: more epochs without improvement than it runs (lstm.patience's bounds).
        patience: (b.epochs + 1).min(100_000),
        ..Default::default()
    };
    let dims = NetDims {
        fast_dim: FEATURES,
        fast_len: FAST_LEN,
        slow_dim: FEATURES,
        slow_len: SLOW_LEN,
        context_dim: CONTEXT,
    };
    let mut t = LstmTrainer::new(cfg, dims, device)?;
    let params: i64 = t.vs.trainable_variables().iter().map(|v| v.numel() as i64).sum();
    // Train on all samples; validate on one batch so that the epoch is the training loop.
    let train: Vec<i64> = (0..n as i64).collect();
    let valid: Vec<i64> = (0..b.batch as i64).collect();
    let (hist, gpu) = fit_sampled(&mut t, &ds, (&train, &valid), device)?;
    let timed = &hist[1..];
    let secs = timed.iter().map(|s| s.epoch_secs).sum::<f64>() / timed.len().max(1) as f64;
    let sps = n as f64 / secs;
    // What libgomp's threads do while they wait (`crate::lstm::omp`): a spin of 3000 unless the user set it.
    let wait_policy = std::env::var("OMP_WAIT_POLICY").ok();
    let spin_count = std::env::var(crate::lstm::omp::SPIN.0).ok();
    if b.json {
        outln!(
            "{}",
            serde_json::json!({
                "impl": "tradebot", "device": crate::training::device_name(device), "samples": n, "batch": b.batch, "params": params,
                "fast_len": FAST_LEN, "slow_len": SLOW_LEN, "features": FEATURES, "context": CONTEXT,
                "epochs_timed": timed.len(), "epoch_secs": secs, "samples_per_sec": sps,
                "threads": tch::get_num_threads(), "parts": crate::lstm::parts::count(device),
                "omp_wait_policy": wait_policy, "gomp_spincount": spin_count,
                "gpu": gpu,
            })
        )?;
    } else {
        outln!(
            "tradebot lstm on {}: {n} samples, batch {}, {params} parameters, windows {FAST_LEN}x{FEATURES} + {SLOW_LEN}x{FEATURES} + {CONTEXT}: {secs:.2} s/epoch, {sps:.0} samples/s ({} threads, minibatches in {} parts, OMP_WAIT_POLICY {}, GOMP_SPINCOUNT {})",
            b.device,
            b.batch,
            tch::get_num_threads(),
            crate::lstm::parts::count(device),
            wait_policy.as_deref().unwrap_or("unset"),
            spin_count.as_deref().unwrap_or("unset")
        )?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The bench's fit; on CUDA, NVML's readings over the epochs after the warm-up one (`bench::steady`).
#[cfg(feature = "train")]
fn fit_sampled(
    t: &mut crate::lstm::train::LstmTrainer,
    ds: &crate::lstm::dataset::WindowDataset,
    (train, valid): (&[i64], &[i64]),
    device: tch::Device,
) -> anyhow::Result<(Vec<crate::lstm::train::EpochStats>, Option<crate::ml::gpu::GpuStats>)> {
    let mut window = super::steady::Steady::new(device);
    let hist = t.fit(ds, train, valid, None, |_| {
        window.mark(1);
        true
    })?;
    let gpu = window.close(hist.len() as u64).and_then(|w| w.gpu);
    Ok((hist, gpu))
}

#[cfg(feature = "train")]
fn dump(dir: &std::path::Path, s: &crate::lstm::dataset::DatasetSpec) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let i64s = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    std::fs::write(dir.join("fast.f32"), f32s(&s.fast))?;
    std::fs::write(dir.join("slow.f32"), f32s(&s.slow))?;
    std::fs::write(dir.join("context.f32"), f32s(&s.context))?;
    std::fs::write(dir.join("fast_end.i64"), i64s(&s.fast_end))?;
    std::fs::write(dir.join("slow_end.i64"), i64s(&s.slow_end))?;
    std::fs::write(dir.join("context_row.i64"), i64s(&s.context_row))?;
    std::fs::write(dir.join("labels.i64"), i64s(&s.labels))?;
    let meta = serde_json::json!({
        "fast_len": s.fast_len, "slow_len": s.slow_len, "fast_dim": s.fast_dim, "slow_dim": s.slow_dim,
        "context_dim": s.context_dim, "fast_hidden": 56, "slow_hidden": 32, "context_hidden": [16],
        "head_hidden": [32], "learning_rate": 1e-3, "weight_decay": 1e-2,
    });
    std::fs::write(dir.join("meta.json"), meta.to_string())
}
