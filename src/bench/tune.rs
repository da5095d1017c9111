//! `tradebot bench tune`: the training work of a hyper-parameter search, many trials at once, as `tradebot
//! tune` runs it (trials side by side on a pool of threads, the native trainer, each trial's own seed), on
//! `bench ppo`'s synthetic panel and FinRL's rules, so that `benches/peers/optuna_sb3.py` runs the same
//! trials (the same parameters, steps and network) with Optuna driving Stable-Baselines3 on FinRL's numpy
//! env. Each trial's figure is its training episodes' mean return; trials per hour is the result.

#[cfg(feature = "train")]
use crate::out::outln;
use crate::training::device::DeviceRequest;
use anyhow::bail;
use std::process::ExitCode;

/// The arguments of `tradebot bench tune`.
#[derive(Debug, Clone, clap::Args)]
pub struct TuneBench {
    /// Trials in all (each the same network and environment steps).
    #[arg(long, default_value_t = 8)]
    pub trials: usize,
    /// Trials training at once (on as many threads).
    #[arg(long, default_value_t = 2)]
    pub parallel: usize,
    /// Environment steps per trial.
    #[arg(long, default_value_t = 4096)]
    pub steps: u64,
    /// Assets (synthetic price series) in each environment.
    #[arg(long, default_value_t = 30)]
    pub assets: usize,
    /// Trading days of synthetic daily bars.
    #[arg(long, default_value_t = 2520)]
    pub days: usize,
    /// Hidden layers of every trial's actor and critic (comma-separated), tanh.
    #[arg(long, value_delimiter = ',', default_value = "64,64")]
    pub hidden: Vec<i64>,
    /// Rollout steps of each env before each PPO update.
    #[arg(long, default_value_t = 2048)]
    pub n_steps: usize,
    /// Samples per PPO minibatch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// The random seed (the synthetic bars and the run): the same seed does the same work.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The figures as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Train the trials as one population (`tune ppo --population on`): their envs one env-kernel launch
    /// (standard f64 accounting in place of FinRL's float32), their networks stacked; every trial then runs
    /// `--epochs` epochs (the population's shape) instead of drawing them.
    #[arg(long)]
    pub population: bool,
    /// cpu | cuda (with --population).
    #[arg(long, default_value = "cpu", value_parser = DeviceRequest::parse_arg)]
    pub device: DeviceRequest,
    /// Envs per trial (with --population).
    #[arg(long, default_value_t = 1)]
    pub envs: usize,
    /// Epochs of every trial, in place of drawing them (a population's trials share them: 5 by default there).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// The whole search (the same trials from fresh weights, the same seeds) is repeated until this many
    /// seconds of training have passed, so that a fast run's figure is not timer noise; the rate is over all
    /// runs.
    #[arg(long, default_value_t = 0.5)]
    pub min_seconds: f64,
}

/// The parameters the bench searches (the network, rollout and batch stay fixed: the same work per trial).
pub fn space() -> std::collections::BTreeMap<String, crate::config::Dist> {
    use crate::config::Dist;
    std::collections::BTreeMap::from([
        ("learning_rate".into(), Dist::Log { low: 1e-5, high: 1e-3 }),
        ("n_epochs".into(), Dist::Int { low: 3, high: 10 }),
        ("clip_range".into(), Dist::Linear { low: 0.1, high: 0.3 }),
        ("ent_coef".into(), Dist::Log { low: 1e-6, high: 1e-2 }),
        ("gamma".into(), Dist::Linear { low: 0.95, high: 0.999 }),
        ("gae_lambda".into(), Dist::Linear { low: 0.8, high: 0.99 }),
    ])
}

/// Runs `tradebot bench tune`: N trials, P at a time, and prints trials per hour.
#[cfg(feature = "train")]
pub fn tune(b: TuneBench) -> anyhow::Result<ExitCode> {
    use crate::env::Accounting::Standard;
    use crate::env::Panel;
    use crate::rl::BatchEnv as _;
    use crate::rl::ppo::{CpuBackend, Ppo, PpoConfig};
    use crate::rl::trading::TradingEnv;
    use crate::tune::space::{random, trial_seed};
    use std::sync::Arc;

    if b.trials == 0 || b.parallel == 0 || b.steps == 0 || b.days < 3 || b.assets == 0 {
        bail!("--trials, --parallel, --steps and --assets must be at least 1, --days at least 3");
    }
    if !(0.0..=3600.0).contains(&b.min_seconds) {
        bail!("--min-seconds {}: must be between 0 and 3600 (0 runs the trials once)", b.min_seconds);
    }
    if !b.population && b.device != DeviceRequest::Cpu {
        bail!(
            "--device {}: trials one at a time train on the CPU threads only; add --population to train them on the GPU, or use --device cpu",
            b.device
        );
    }
    tch::set_num_threads(1);
    let panel = Arc::new(Panel::synthetic(b.days, b.assets, 1, b.seed)?);
    let env_cfg = super::ppo::finrl_env_config(b.days, b.seed);
    let mut params: Vec<_> = (0..b.trials).map(|n| random(&space(), b.seed, n)).collect();
    if let Some(epochs) = b.epochs.or(b.population.then_some(5)) {
        for p in &mut params {
            p.insert("n_epochs".into(), epochs as f64);
        }
    }
    // Every run trains the same trials from fresh weights: the same work, the same values.
    let build = || -> anyhow::Result<_> {
        let (mut trials, mut cohort) = (Vec::new(), Vec::new());
        for (n, p) in params.iter().enumerate() {
            let seed = trial_seed(b.seed, n);
            let cfg = PpoConfig {
                hidden: b.hidden.clone(),
                n_steps: b.n_steps,
                batch_size: b.batch_size,
                n_epochs: p["n_epochs"] as usize,
                learning_rate: p["learning_rate"],
                clip_range: p["clip_range"],
                ent_coef: p["ent_coef"],
                gamma: p["gamma"],
                gae_lambda: p["gae_lambda"],
                seed,
                cpu_backend: if b.population { CpuBackend::Libtorch } else { CpuBackend::Native },
                ..Default::default()
            };
            if b.population {
                let env_cfg = crate::env::EnvConfig { seed, n_envs: b.envs, accounting: Standard, ..env_cfg.clone() };
                cohort.push((cfg, env_cfg));
                continue;
            }
            let env = TradingEnv::new(crate::env::EnvConfig { seed, ..env_cfg.clone() }, panel.clone())?;
            let ppo = Ppo::new(cfg, env.obs_dim(), env.act_dim(), tch::Device::Cpu)?;
            trials.push((env, ppo, None::<f64>));
        }
        Ok((trials, cohort))
    };
    let mut total: Option<Run> = None;
    loop {
        let (mut trials, cohort) = build()?;
        let run = if b.population { population(&b, &panel, cohort)? } else { threads(&b, &mut trials)? };
        let sum = match total.take() {
            None => run,
            Some(t) => t.and(run),
        };
        if sum.seconds >= b.min_seconds {
            report(&b, &params, &sum)?;
            return Ok(ExitCode::SUCCESS);
        }
        total = Some(sum);
    }
}

/// The figures: one JSON object, or a line for people.
#[cfg(feature = "train")]
fn report(b: &TuneBench, params: &[crate::tune::space::Params], run: &Run) -> anyhow::Result<()> {
    use crate::training::device::EnvBackend;
    let env = if b.population { EnvBackend::Kernel } else { EnvBackend::VecEnv };
    let whole = (b.trials as u64 * run.runs) as f64 / run.seconds * 3600.0;
    // On CUDA: a search as long as its updates take once the first is done (`bench::steady`).
    let search_secs = run.steady.map(|(w, updates)| w.seconds / w.work.max(1) as f64 * updates as f64);
    let per_hour = search_secs.map_or(whole, |secs| b.trials as f64 / secs * 3600.0);
    let (seconds, runs) = (run.seconds, run.runs);
    if b.json {
        let mut row = serde_json::json!({
            "what": "tradebot-tune", "trials": b.trials, "parallel": b.parallel, "steps_per_trial": b.steps,
            "assets": b.assets, "days": b.days, "hidden": b.hidden, "n_steps": b.n_steps,
            "batch_size": b.batch_size, "seed": b.seed, "params": params, "values": run.values,
            "runs": runs, "env_steps": run.steps, "seconds": seconds, "trials_per_hour": per_hour,
            "population": b.population, "device": run.device, "env": env.as_str(), "envs": b.envs,
        });
        if let (Some((w, updates)), Some(secs)) = (run.steady, search_secs) {
            row["timed"] = "each search's updates after its first, as long as all of them".into();
            row["timed_updates"] = w.work.into();
            row["timed_seconds"] = w.seconds.into();
            row["search_seconds"] = secs.into();
            row["updates_per_search"] = updates.into();
            row["whole_run_trials_per_hour"] = whole.into();
            row["gpu"] = serde_json::to_value(w.gpu)?;
        }
        outln!("{row}")?;
    } else {
        let how = if b.population {
            format!("as one population on {}", run.device)
        } else {
            format!("{} at a time", b.parallel)
        };
        outln!(
            "{} trials of {} steps ({how}, hidden {:?}, {} assets), {runs} runs: {seconds:.2} s = {per_hour:.0} trials/hour",
            b.trials,
            b.steps,
            b.hidden,
            b.assets
        )?;
    }
    Ok(())
}

#[cfg(feature = "train")]
struct Run {
    /// The device that trained (`cpu`, `cuda:0`).
    device: String,
    /// Training seconds, over all runs.
    seconds: f64,
    /// Environment steps, over all runs.
    steps: u64,
    /// Times the whole search ran (`--min-seconds`).
    runs: u64,
    values: Vec<Option<f64>>,
    /// On CUDA, the population's steady part (`bench::steady`), its work counted in updates, over all
    /// runs; and the updates of one search.
    steady: Option<(super::steady::Window, u64)>,
}

#[cfg(feature = "train")]
impl Run {
    /// This run and the next of the same search, as one figure.
    fn and(self, next: Run) -> Run {
        let steady = match (self.steady, next.steady) {
            (Some((a, n)), Some((b, _))) => super::steady::join(Some(a), Some(b)).map(|w| (w, n)),
            (a, b) => a.or(b),
        };
        Run {
            seconds: self.seconds + next.seconds,
            steps: self.steps + next.steps,
            runs: self.runs + 1,
            steady,
            ..self
        }
    }
}

/// The trials side by side on `--parallel` threads, each its own trainer on its own `VecEnv`.
#[cfg(feature = "train")]
fn threads(
    b: &TuneBench,
    trials: &mut [(crate::rl::trading::TradingEnv, crate::rl::ppo::Ppo, Option<f64>)],
) -> anyhow::Result<Run> {
    use rayon::prelude::*;
    use std::time::Instant;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.parallel).build()?;
    let t0 = Instant::now();
    let results: Vec<anyhow::Result<()>> = pool.install(|| {
        trials
            .par_iter_mut()
            .with_max_len(1)
            .map(|(env, ppo, value)| {
                ppo.train(env, b.steps, |s| {
                    *value = s.mean_return.or(*value);
                    true
                })?;
                Ok(())
            })
            .collect()
    });
    let seconds = t0.elapsed().as_secs_f64();
    for r in results {
        r?;
    }
    let steps = trials.iter().map(|t| t.1.env_steps).sum();
    Ok(Run {
        device: "cpu".into(),
        seconds,
        steps,
        runs: 1,
        values: trials.iter().map(|t| t.2).collect(),
        steady: None,
    })
}

/// The trials as one population on `--device`: one env launch, stacked networks, `--parallel` CPU threads
/// for libtorch on the CPU.
#[cfg(feature = "train")]
fn population(
    b: &TuneBench,
    panel: &crate::env::Panel,
    cohort: Vec<(crate::rl::ppo::PpoConfig, crate::env::EnvConfig)>,
) -> anyhow::Result<Run> {
    use crate::env::kernel::TensorKernelEnv;
    use crate::rl::ppo::Ppo;
    use crate::rl::ppo::population::Population;
    use anyhow::Context;
    use std::time::Instant;
    let device = crate::training::pick_device(&b.device)?;
    if !device.is_cuda() {
        tch::set_num_threads(b.parallel.max(1) as i32);
    }
    let (mut ppos, mut envs) = (Vec::new(), Vec::new());
    for (cfg, env_cfg) in cohort {
        let env = TensorKernelEnv::new(&env_cfg, panel, device).context("starting the env kernel")?;
        ppos.push(Ppo::new(cfg, env.obs_dim(), env.n_assets(), device)?);
        envs.push(env);
    }
    let mut env = TensorKernelEnv::stack(envs)?;
    let mut pop = Population::new(&ppos.iter().collect::<Vec<_>>())?;
    let per_update = (b.n_steps * b.envs) as u64;
    let updates = b.steps.div_ceil(per_update).max(1);
    let mut values = vec![None; ppos.len()];
    let mut window = super::steady::Steady::new(device);
    let t0 = Instant::now();
    for u in 0..updates {
        if u == 1 {
            window.mark(1);
        }
        let lrs: Vec<f64> = ppos
            .iter()
            .map(|p| p.cfg.learning_rate * if p.cfg.anneal_lr { 1.0 - u as f64 / updates as f64 } else { 1.0 })
            .collect();
        for (v, o) in values.iter_mut().zip(pop.round(&mut env, &lrs)?) {
            *v = o?.mean_return.or(*v);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let steady = window.close(updates).map(|w| (w, updates));
    let device = crate::training::device_name(device);
    Ok(Run { device, seconds, steps: updates * per_update * ppos.len() as u64, runs: 1, values, steady })
}

/// `tradebot bench tune` in a build without the `train` feature: an error saying it needs one.
#[cfg(not(feature = "train"))]
pub fn tune(_: TuneBench) -> anyhow::Result<ExitCode> {
    bail!("bench tune needs a build with the `train` feature (libtorch)")
}

#[cfg(all(test, feature = "train"))]
mod tests {
    use super::*;

    #[test]
    fn trials_alone_on_cuda_are_refused_not_run_on_the_cpu() {
        let b = TuneBench {
            trials: 1,
            parallel: 1,
            steps: 8,
            assets: 1,
            days: 10,
            hidden: vec![4],
            n_steps: 8,
            batch_size: 8,
            seed: 1,
            json: true,
            population: false,
            device: DeviceRequest::Cuda(0),
            envs: 1,
            epochs: Some(1),
            min_seconds: 0.5,
        };
        let e = tune(b).unwrap_err().to_string();
        assert!(e.contains("--device cuda") && e.contains("--population"), "{e}");
    }
}
