//! `tradebot bench tune`: the training work of a hyper-parameter search, many trials at once, as `tradebot
//! tune` runs it (trials side by side on a pool of threads, the native trainer, each trial's own seed), on
//! `bench ppo`'s synthetic panel and FinRL's rules, so that `benches/peers/optuna_sb3.py` runs the same
//! trials (the same parameters, steps and network) with Optuna driving Stable-Baselines3 on FinRL's numpy
//! env. Each trial's figure is its training episodes' mean return; trials per hour is the result.

use anyhow::bail;
use std::process::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct TuneBench {
    #[arg(long, default_value_t = 8)]
    pub trials: usize,
    /// Trials training at once (on as many threads).
    #[arg(long, default_value_t = 2)]
    pub parallel: usize,
    /// Environment steps per trial.
    #[arg(long, default_value_t = 4096)]
    pub steps: u64,
    #[arg(long, default_value_t = 30)]
    pub assets: usize,
    #[arg(long, default_value_t = 2520)]
    pub days: usize,
    /// Hidden layers of every trial's actor and critic (comma-separated), tanh.
    #[arg(long, value_delimiter = ',', default_value = "64,64")]
    pub hidden: Vec<i64>,
    #[arg(long, default_value_t = 2048)]
    pub n_steps: usize,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
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

#[cfg(feature = "train")]
pub fn tune(b: TuneBench) -> anyhow::Result<ExitCode> {
    use crate::env::Panel;
    use crate::rl::BatchEnv as _;
    use crate::rl::ppo::{CpuBackend, Ppo, PpoConfig};
    use crate::rl::trading::TradingEnv;
    use crate::tune::space::{random, trial_seed};
    use rayon::prelude::*;
    use std::sync::Arc;
    use std::time::Instant;

    if b.trials == 0 || b.parallel == 0 || b.steps == 0 || b.days < 3 || b.assets == 0 {
        bail!("--trials, --parallel, --steps and --assets must be at least 1, --days at least 3");
    }
    tch::set_num_threads(1);
    let panel = Arc::new(Panel::synthetic(b.days, b.assets, 1, b.seed)?);
    let env_cfg = super::ppo::finrl_env_config(b.days, b.seed);
    let params: Vec<_> = (0..b.trials).map(|n| random(&space(), b.seed, n)).collect();
    let mut trials = Vec::new();
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
            cpu_backend: CpuBackend::Native,
            ..Default::default()
        };
        let env = TradingEnv::new(crate::env::EnvConfig { seed, ..env_cfg.clone() }, panel.clone())?;
        let ppo = Ppo::new(cfg, env.obs_dim(), env.act_dim(), tch::Device::Cpu)?;
        trials.push((env, ppo, None::<f64>));
    }
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
    let steps: u64 = trials.iter().map(|t| t.1.env_steps).sum();
    let per_hour = b.trials as f64 / seconds * 3600.0;
    let values: Vec<Option<f64>> = trials.iter().map(|t| t.2).collect();
    if b.json {
        println!(
            "{}",
            serde_json::json!({
                "what": "tradebot-tune", "trials": b.trials, "parallel": b.parallel, "steps_per_trial": b.steps,
                "assets": b.assets, "days": b.days, "hidden": b.hidden, "n_steps": b.n_steps,
                "batch_size": b.batch_size, "seed": b.seed, "params": params, "values": values,
                "env_steps": steps, "seconds": seconds, "trials_per_hour": per_hour,
            })
        );
    } else {
        println!(
            "{} trials of {} steps ({} at a time, hidden {:?}, {} assets): {seconds:.2} s = {per_hour:.0} trials/hour",
            b.trials, b.steps, b.parallel, b.hidden, b.assets
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "train"))]
pub fn tune(_: TuneBench) -> anyhow::Result<ExitCode> {
    bail!("bench tune needs a build with the `train` feature (libtorch)")
}
