//! `tradebot bench env`: steps the vectorized environment on a seeded synthetic panel with random actions
//! and prints env-steps/s and asset-steps/s (one line of JSON with `--json`).

use crate::env::{Accounting, EnvConfig, Panel, StepOutcome, VecEnv, rng::SplitMix64};
use crate::exec::ExecParams;
use crate::out::outln;
use crate::training::device::DeviceRequest;
use anyhow::{Context, bail};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// The arguments of `tradebot bench env`.
#[derive(Debug, Clone, clap::Args)]
pub struct EnvBench {
    /// Environments stepped side by side.
    #[arg(long, default_value_t = 1)]
    pub envs: usize,
    /// Assets (synthetic price series) in each environment.
    #[arg(long, default_value_t = 30)]
    pub assets: usize,
    /// Steps of every env (episodes of --episode-len steps restart as they end).
    #[arg(long, default_value_t = 2519)]
    pub steps: usize,
    /// Trading days of synthetic daily bars.
    #[arg(long, default_value_t = 2520)]
    pub days: usize,
    /// Steps of an episode (an env restarts when its episode ends; at most --days - 1).
    #[arg(long, default_value_t = 2519)]
    pub episode_len: usize,
    /// cpu | cuda
    #[arg(long, default_value = "cpu", value_parser = super::cpu_or_cuda)]
    pub device: DeviceRequest,
    /// rust (plain-Rust env, CPU only) | kernel (the C kernel: its CPU build, or its CUDA build through
    /// NVRTC on --device cuda). Default: rust on cpu, kernel on cuda.
    #[arg(long, value_enum)]
    pub backend: Option<EnvBackend>,
    /// CPU threads stepping the envs (rust and kernel backends; 0 = every core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// FinRL's work: hmax 100, > 10 shares, 0.1% fees, turbulence rule, FinRL's NumPy accounting (rust
    /// backend). Without it: stops, cooldown and slippage on, f64 accounting.
    #[arg(long)]
    pub finrl: bool,
    /// The random seed (the synthetic bars and the run): the same seed does the same work.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The figures as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// On the CPU, --steps is run again (the same actions, the envs carrying on) until this many seconds
    /// have passed, so that a fast run's figure is not a few milliseconds of timer noise.
    #[arg(long, default_value_t = 0.5)]
    pub min_seconds: f64,
}

/// Which environment `bench env` steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EnvBackend {
    /// `VecEnv`, the plain-Rust env (CPU only).
    Rust,
    /// The C kernel: its CPU build, or its CUDA build through NVRTC on `--device cuda`.
    Kernel,
}

struct Timing {
    backend: &'static str,
    seconds: f64,
    /// Steps of every env timed (a multiple of --steps).
    steps: usize,
    /// On CUDA: NVML's figures over the timed steps (`bench::steady`), as JSON.
    gpu: Option<serde_json::Value>,
}

fn config(b: &EnvBench) -> EnvConfig {
    let exec = if b.finrl {
        ExecParams {
            max_trade: 100.0,
            min_order: 11.0,
            fee_bps: 10.0,
            cash_cap_ignores_fees: true,
            ..Default::default()
        }
    } else {
        ExecParams { trailing_stop: 0.05, cooldown_bars: 3, slippage_bps: 5.0, ..Default::default() }
    };
    EnvConfig {
        n_envs: b.envs,
        episode_len: b.episode_len,
        initial_cash: 1e6,
        exec,
        reward_scale: 2f64.powi(-11),
        turbulence_threshold: b.finrl.then_some(99.0),
        fixed_start: b.finrl,
        seed: b.seed,
        accounting: if b.finrl { Accounting::FinrlNumpy } else { Accounting::Standard },
        ..Default::default()
    }
}

/// Random actions for 64 steps, reused cyclically so the generator is not timed.
fn actions(b: &EnvBench) -> Vec<f32> {
    let mut rng = SplitMix64::new(b.seed ^ 0xA5A5);
    (0..64 * b.envs * b.assets).map(|_| rng.action()).collect()
}

fn run_rust(b: &EnvBench, panel: Arc<Panel>) -> anyhow::Result<Timing> {
    let mut env = VecEnv::new(config(b), panel)?.with_threads(b.threads)?;
    time_host_steps(b, "rust", |a, step| env.step(a, step))
}

/// Times `b.steps` calls of `step` with the bench's actions (64 steps' worth, reused cyclically).
fn time_host_steps(
    b: &EnvBench,
    backend: &'static str,
    mut step: impl FnMut(&[f32], &mut StepOutcome) -> Result<(), crate::env::EnvError>,
) -> anyhow::Result<Timing> {
    let acts = actions(b);
    let n = b.envs * b.assets;
    let mut out = StepOutcome::default();
    let t0 = Instant::now();
    let mut done = 0;
    while done == 0 || t0.elapsed().as_secs_f64() < b.min_seconds {
        for s in 0..b.steps {
            let k = (done + s) % 64;
            step(&acts[k * n..(k + 1) * n], &mut out)?;
        }
        done += b.steps;
    }
    let seconds = t0.elapsed().as_secs_f64();
    std::hint::black_box(&out);
    Ok(Timing { backend, seconds, steps: done, gpu: None })
}

/// The kernel's CPU build (`CpuKernelEnv`), or with `cuda` its CUDA build (`TensorKernelEnv`), the actions
/// copied into its device buffer from a device tensor each step.
fn run_kernel(b: &EnvBench, panel: Arc<Panel>, cuda: bool) -> anyhow::Result<Timing> {
    if b.finrl {
        bail!("--backend kernel has standard f64 accounting only: drop --finrl (or use --backend rust)");
    }
    if cuda {
        return run_kernel_cuda(b, &panel);
    }
    let mut env = crate::env::kernel::CpuKernelEnv::new(&config(b), panel)?.with_threads(b.threads)?;
    time_host_steps(b, "kernel", |a, step| env.step(a, step))
}

#[cfg(feature = "train")]
fn run_kernel_cuda(b: &EnvBench, panel: &Panel) -> anyhow::Result<Timing> {
    use tch::{Device, Tensor};
    if !crate::runtime_libs::load_torch_cuda() {
        bail!("--device cuda: no CUDA device is usable (tch::Cuda::is_available() is false)");
    }
    let device = Device::Cuda(0);
    let mut env = crate::env::kernel::TensorKernelEnv::new(&config(b), panel, device)?;
    let acts = Tensor::from_slice(&actions(b)).view([64, b.envs as i64, b.assets as i64]).to_device(device);
    let mut step = |s: usize| -> anyhow::Result<()> {
        env.set_actions(&acts.get((s % 64) as i64))?;
        env.step()?;
        Ok(())
    };
    // The first launches (the module's first use, the allocator's first blocks) untimed: `bench::steady`.
    for s in 0..WARMUP_STEPS.min(b.steps) {
        step(s)?;
    }
    let mut window = crate::bench::steady::Steady::new(device);
    window.mark(0);
    let t0 = Instant::now();
    let mut done = 0;
    while done == 0 || t0.elapsed().as_secs_f64() < b.min_seconds {
        for s in 0..b.steps {
            step(done + s)?;
        }
        done += b.steps;
    }
    let timed = window.close(done as u64).context("timing the kernel on cuda:0")?;
    let (_, episodes) = env.take_returns()?;
    std::hint::black_box(episodes);
    let gpu = timed.gpu.map(serde_json::to_value).transpose()?;
    Ok(Timing { backend: "kernel-cuda", seconds: timed.seconds, steps: done, gpu })
}

/// Steps run untimed before the kernel's CUDA build is timed.
#[cfg(feature = "train")]
const WARMUP_STEPS: usize = 64;

#[cfg(not(feature = "train"))]
fn run_kernel_cuda(_: &EnvBench, _: &Panel) -> anyhow::Result<Timing> {
    bail!("the kernel's CUDA build needs a build with the `train` feature (cudarc, libtorch)")
}

/// Runs `tradebot bench env`: steps the environment with random actions and prints the rates; refuses
/// zero sizes.
pub fn env(b: EnvBench) -> anyhow::Result<ExitCode> {
    if b.envs == 0 || b.assets == 0 || b.steps == 0 {
        bail!("--envs, --assets and --steps must be at least 1");
    }
    if !(0.0..=3600.0).contains(&b.min_seconds) {
        bail!("--min-seconds {}: must be between 0 and 3600 (0 times --steps once)", b.min_seconds);
    }
    // The kernel's CUDA build runs on CUDA device 0 (`--device cuda`, `super::cpu_or_cuda`).
    let cuda = match b.device {
        DeviceRequest::Cpu => false,
        DeviceRequest::Cuda(0) => true,
        other => return Err(super::NotCpuOrCuda(other.to_string()).into()),
    };
    let backend = b.backend.unwrap_or(if cuda { EnvBackend::Kernel } else { EnvBackend::Rust });
    let panel = Panel::synthetic(b.days, b.assets, 1, b.seed).context("building the synthetic panel")?;
    let t = match backend {
        EnvBackend::Rust if cuda => {
            bail!("--backend rust runs on the CPU only; use --backend kernel with --device cuda")
        }
        EnvBackend::Rust => run_rust(&b, Arc::new(panel))?,
        EnvBackend::Kernel => run_kernel(&b, Arc::new(panel), cuda)?,
    };
    let env_steps = (t.steps * b.envs) as f64 / t.seconds;
    let asset_steps = env_steps * b.assets as f64;
    if b.json {
        outln!(
            "{}",
            serde_json::json!({
                "backend": t.backend, "device": if cuda { "cuda:0" } else { "cpu" },
                "env": match t.backend { "rust" => "VecEnv", _ => "kernel" }, "threads": b.threads, "finrl_rules": b.finrl, "envs": b.envs,
                "assets": b.assets, "steps": t.steps, "seconds": t.seconds,
                "env_steps_per_s": env_steps, "asset_steps_per_s": asset_steps, "gpu": t.gpu,
            })
        )?;
    } else {
        outln!(
            "{} on {}: {} envs x {} assets x {} steps in {:.3} s: {:.0} env-steps/s, {:.0} asset-steps/s",
            t.backend,
            if cuda { "cuda" } else { "cpu" },
            b.envs,
            b.assets,
            t.steps,
            t.seconds,
            env_steps,
            asset_steps
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
