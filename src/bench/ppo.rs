//! `tradebot bench ppo`: end-to-end PPO training throughput (rollouts and updates, env steps per second)
//! on the trading env over a seeded synthetic panel with FinRL's rules, for a stated configuration that
//! `benches/peers/sb3_ppo.py` repeats with Stable-Baselines3 on FinRL's numpy env.

#[cfg(feature = "train")]
use crate::out::outln;
use anyhow::bail;
use std::process::ExitCode;

/// The arguments of `tradebot bench ppo`.
#[derive(Debug, Clone, clap::Args)]
pub struct PpoBench {
    /// Environments stepped side by side.
    #[arg(long, default_value_t = 1)]
    pub envs: usize,
    /// Assets (synthetic price series) in each environment.
    #[arg(long, default_value_t = 30)]
    pub assets: usize,
    /// Trading days of synthetic daily bars.
    #[arg(long, default_value_t = 2520)]
    pub days: usize,
    /// Total environment steps (rounded up to whole updates of envs x n_steps).
    #[arg(long, default_value_t = 4096)]
    pub steps: u64,
    /// Hidden layers of the actor and of the critic (comma-separated), tanh.
    #[arg(long, value_delimiter = ',', default_value = "64,64")]
    pub hidden: Vec<i64>,
    /// Rollout steps of each env before each PPO update.
    #[arg(long, default_value_t = 2048)]
    pub n_steps: usize,
    /// Samples per PPO minibatch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Passes over each rollout per PPO update.
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    /// CPU threads: libtorch's intra-op threads, and the pool of the env's chunks and the native trainer's
    /// GEMM blocks (1 = the same single core the peer gets).
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// cpu | cuda
    #[arg(long, default_value = "cpu", value_parser = super::cpu_or_cuda)]
    pub device: crate::training::device::DeviceRequest,
    /// On the CPU: native (plain Rust, the default) | libtorch (the tch code CUDA runs).
    #[arg(long, value_enum, default_value = "native", hide_possible_values = true)]
    pub cpu_backend: crate::config::CpuBackend,
    /// The env: auto (the env kernel on the training device with --device cuda, `VecEnv` on the CPU
    /// otherwise) | kernel | vec. The kernel keeps standard f64 accounting in place of FinRL's float32.
    #[arg(long, default_value = "auto")]
    pub env: String,
    /// bfloat16 autocast for the forward passes on CUDA (`ppo.mixed_precision`).
    #[arg(long)]
    pub mixed_precision: bool,
    /// The random seed (the synthetic bars and the run): the same seed does the same work.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The figures as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// The whole run (--steps from fresh weights, the same seed) is repeated until this many seconds of
    /// training have passed, so that a fast run's figure is not timer noise; the rate is over all runs.
    #[arg(long, default_value_t = 0.5)]
    pub min_seconds: f64,
}

/// Runs `tradebot bench ppo`: end-to-end PPO training on the environment, printing env-steps/s.
#[cfg(feature = "train")]
pub fn ppo(b: PpoBench) -> anyhow::Result<ExitCode> {
    use crate::env::{Accounting, EnvConfig, Panel};
    use crate::rl::BatchEnv;
    use crate::rl::ppo::{Ppo, PpoConfig};
    use crate::rl::trading::{KernelTradingEnv, TradingEnv};
    use crate::training::device::EnvBackend;
    use anyhow::Context;
    use std::sync::Arc;
    use std::time::Instant;

    let (device, cpu_backend) = checked(&b)?;
    tch::set_num_threads(b.threads.max(1));
    let panel = Arc::new(Panel::synthetic(b.days, b.assets, 1, b.seed).context("building the synthetic panel")?);
    let env_cfg = EnvConfig { n_envs: b.envs, ..finrl_env_config(b.days, b.seed) };
    let kernel = match b.env.as_str() {
        "auto" => device.is_cuda(),
        "kernel" => true,
        "vec" => false,
        other => bail!("--env {other:?}: must be auto, kernel or vec"),
    };
    let make_env = || -> anyhow::Result<Box<dyn BatchEnv + Send>> {
        Ok(if kernel {
            let cfg = EnvConfig { accounting: Accounting::Standard, ..env_cfg.clone() };
            Box::new(KernelTradingEnv::new(&cfg, &panel, device).context("starting the env kernel (or use --env vec)")?)
        } else {
            Box::new(TradingEnv::new(env_cfg.clone(), panel.clone())?)
        })
    };
    let env_name = if kernel { EnvBackend::Kernel } else { EnvBackend::VecEnv }.as_str();
    let device_name = crate::training::device_name(device);
    let cfg = PpoConfig {
        hidden: b.hidden.clone(),
        n_steps: b.n_steps,
        batch_size: b.batch_size,
        n_epochs: b.epochs,
        seed: b.seed,
        cpu_backend,
        mixed_precision: b.mixed_precision,
        ..Default::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(b.threads.max(1) as usize)
        .build()
        .context("starting the training threads")?;
    let (mut seconds, mut runs, mut env_steps) = (0.0, 0u64, 0u64);
    // On CUDA, the figure is each run's steady part: from the end of its first update (`bench::steady`).
    let mut steady = None;
    let (env, ppo) = loop {
        let mut env = make_env()?;
        let mut ppo = Ppo::new(cfg.clone(), env.obs_dim(), env.act_dim(), device)?;
        let mut window = super::steady::Steady::new(device);
        let t0 = Instant::now();
        pool.install(|| {
            ppo.train(&mut *env, b.steps, |s| {
                window.mark(s.env_steps);
                true
            })
        })?;
        if device.is_cuda() {
            tch::Cuda::synchronize(0);
        }
        seconds += t0.elapsed().as_secs_f64();
        runs += 1;
        env_steps += ppo.env_steps;
        steady = super::steady::join(steady, window.close(ppo.env_steps));
        if seconds >= b.min_seconds {
            break (env, ppo);
        }
    };
    report(&b, (&*env, &ppo), (device_name, env_name), (runs, env_steps, seconds), steady)?;
    Ok(ExitCode::SUCCESS)
}

/// The bench's options checked, and its device and CPU backend.
#[cfg(feature = "train")]
fn checked(b: &PpoBench) -> anyhow::Result<(tch::Device, crate::rl::ppo::CpuBackend)> {
    if b.envs == 0 || b.assets == 0 || b.steps == 0 || b.days < 3 {
        bail!("--envs, --assets and --steps must be at least 1, --days at least 3");
    }
    if !(0.0..=3600.0).contains(&b.min_seconds) {
        bail!("--min-seconds {}: must be between 0 and 3600 (0 runs --steps once)", b.min_seconds);
    }
    Ok((crate::training::pick_device(&b.device)?, b.cpu_backend))
}

/// The figures: one JSON object, or a line for people.
#[cfg(feature = "train")]
fn report(
    b: &PpoBench,
    (env, ppo): (&dyn crate::rl::BatchEnv, &crate::rl::ppo::Ppo),
    (device_name, env_name): (String, &str),
    (runs, env_steps, seconds): (u64, u64, f64),
    steady: Option<super::steady::Window>,
) -> anyhow::Result<()> {
    let whole = env_steps as f64 / seconds;
    let rate = steady.map_or(whole, |w| w.work as f64 / w.seconds);
    if b.json {
        let mut row = serde_json::json!({
            "what": "tradebot-ppo", "device": device_name, "backend": ppo.backend(), "env": env_name,
            "mixed_precision": b.mixed_precision, "threads": b.threads, "envs": b.envs,
            "assets": b.assets, "obs_dim": env.obs_dim(), "hidden": b.hidden, "n_steps": b.n_steps,
            "batch_size": b.batch_size, "epochs": b.epochs, "updates": ppo.updates,
            "runs": runs, "env_steps": env_steps, "seconds": seconds, "env_steps_per_s": rate,
        });
        if let Some(w) = steady {
            row["timed"] = "from the end of each run's first update".into();
            row["timed_env_steps"] = w.work.into();
            row["timed_seconds"] = w.seconds.into();
            row["whole_run_env_steps_per_s"] = whole.into();
            row["gpu"] = serde_json::to_value(w.gpu)?;
        }
        outln!("{row}")?;
    } else {
        outln!(
            "PPO on {} ({}, {env_name} env, {} threads): {} envs x {} assets (obs {}), hidden {:?}, n_steps {}, batch {}, {} epochs: {} updates per run, {runs} runs, {env_steps} env steps in {seconds:.2} s = {rate:.0} env-steps/s",
            device_name,
            ppo.backend(),
            b.threads,
            b.envs,
            b.assets,
            env.obs_dim(),
            b.hidden,
            b.n_steps,
            b.batch_size,
            b.epochs,
            ppo.updates,
        )?;
        if let Some(w) = steady {
            outln!(
                "  from the end of each run's first update: {} env steps in {:.2} s; the whole runs: {whole:.0} env-steps/s",
                w.work,
                w.seconds
            )?;
        }
    }
    Ok(())
}

/// One env over `days` days by FinRL's numpy env's rules (the peers' env): its cash, trade size, minimum
/// order, fee, turbulence threshold and float32 accounting, every episode from day 0.
pub fn finrl_env_config(days: usize, seed: u64) -> crate::env::EnvConfig {
    use crate::env::{Accounting, EnvConfig};
    use crate::exec::ExecParams;
    EnvConfig {
        n_envs: 1,
        episode_len: days.saturating_sub(1),
        initial_cash: 1e6,
        exec: ExecParams {
            max_trade: 100.0,
            min_order: 11.0,
            fee_bps: 10.0,
            cash_cap_ignores_fees: true,
            ..Default::default()
        },
        reward_scale: 2f64.powi(-11),
        turbulence_threshold: Some(99.0),
        fixed_start: true,
        seed,
        accounting: Accounting::FinrlNumpy,
        ..Default::default()
    }
}

/// `tradebot bench ppo` in a build without the `train` feature: an error saying it needs one.
#[cfg(not(feature = "train"))]
pub fn ppo(_: PpoBench) -> anyhow::Result<ExitCode> {
    bail!("bench ppo needs a build with the `train` feature (libtorch)")
}
