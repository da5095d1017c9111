//! The search space: a trial's parameters as numbers by name, drawn from `[tune.space]`'s ranges and
//! applied to a copy of the config (`[ppo]` or `[sac]`, by the trial's algorithm, and `[env]`), and each
//! trial's seed.

use crate::config::{ALGORITHM, Config, Dist, Invalid, PpoConfig, TuneConfig, algorithm_of_code};
use crate::env::rng::SplitMix64;
use crate::models::Algorithm;
use std::collections::BTreeMap;

/// A trial's sampled values, by parameter name.
pub(crate) type Params = BTreeMap<String, f64>;

/// The generator of trial `number`'s draws in a search seeded with `seed`: independent of every other
/// trial's, so a trial's parameters and seed never depend on which trials ran beside it.
pub(crate) fn trial_rng(seed: u64, number: usize, stream: u64) -> SplitMix64 {
    SplitMix64::new(SplitMix64::nth(seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407), number as u64))
}

/// Trial `number`'s own seed (PPO's initial weights and sampling, the env's episode starts).
pub(crate) fn trial_seed(seed: u64, number: usize) -> u64 {
    trial_rng(seed, number, 1).next_u64() >> 1
}

/// The bounds of a numeric range in the space the samplers work in (log for `log` ranges; an `int`
/// range widened by half a step each side so that every whole number gets the same share).
pub(crate) fn bounds(d: &Dist) -> Option<(f64, f64)> {
    match d {
        Dist::Log { low, high } => Some((low.ln(), high.ln())),
        Dist::Linear { low, high } => Some((*low, *high)),
        Dist::Int { low, high } => Some((*low as f64 - 0.5, *high as f64 + 0.5)),
        Dist::Choice { .. } => None,
    }
}

/// A value of the sampler's space back in the parameter's own (rounded and clamped for `int`).
pub(crate) fn from_internal(d: &Dist, u: f64) -> f64 {
    match d {
        Dist::Log { low, high } => u.exp().clamp(*low, *high),
        Dist::Linear { low, high } => u.clamp(*low, *high),
        // `+ 0.0`: a draw of -0.4 rounds to -0, shown as "-0"; it is 0.
        Dist::Int { low, high } => u.round().clamp(*low as f64, *high as f64) + 0.0,
        Dist::Choice { values } => values[(u.max(0.0) as usize).min(values.len() - 1)],
    }
}

/// A parameter's value in the sampler's space (for `choice`, its index).
pub(crate) fn to_internal(d: &Dist, x: f64) -> f64 {
    match d {
        Dist::Log { .. } => x.ln(),
        Dist::Linear { .. } | Dist::Int { .. } => x,
        Dist::Choice { values } => values.iter().position(|v| *v == x).unwrap_or(0) as f64,
    }
}

/// A parameter's value as Optuna stores it: a choice's index, any other value as it is.
pub(crate) fn to_internal_choice(d: &Dist, x: f64) -> f64 {
    match d {
        Dist::Choice { .. } => to_internal(d, x),
        _ => x,
    }
}

/// One value drawn uniformly (log-uniformly for `log`) from the range.
pub(crate) fn uniform(d: &Dist, rng: &mut SplitMix64) -> f64 {
    match (d, bounds(d)) {
        (Dist::Choice { values }, _) => values[rng.below(values.len())],
        (_, Some((lo, hi))) => from_internal(d, rng.uniform(lo, hi)),
        (_, None) => unreachable!("every range but choice has bounds"),
    }
}

/// Trial `number`'s parameters drawn at random.
pub(crate) fn random(space: &BTreeMap<String, Dist>, seed: u64, number: usize) -> Params {
    let mut rng = trial_rng(seed, number, 2);
    space.iter().map(|(name, d)| (name.clone(), uniform(d, &mut rng))).collect()
}

fn whole(name: &str, x: f64) -> Result<usize, Invalid> {
    if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= 1e9 {
        Ok(x as usize)
    } else {
        Err(Invalid::Value(format!("tune.space.{name}: {x} is not a whole number")))
    }
}

/// The algorithm a trial of `params` trains: its `algorithm` parameter (`tune.algorithms`), else the
/// study's one algorithm.
pub(crate) fn algorithm(tune: &TuneConfig, params: &Params) -> Result<Algorithm, Invalid> {
    match params.get(ALGORITHM) {
        Some(&x) => algorithm_of_code(x).ok_or_else(|| {
            Invalid::Value(format!("tune.space.{ALGORITHM}: {x} is no algorithm's code (0 ppo, 1 sac)"))
        }),
        None => Ok(tune.algorithms.first().copied().unwrap_or_default()),
    }
}

/// A parameter as `tune show` writes it: the algorithm by name, any other number by `super::short`.
pub(crate) fn show(name: &str, x: f64) -> String {
    match (name, algorithm_of_code(x)) {
        (ALGORITHM, Some(a)) => a.as_str().to_string(),
        _ => super::short(x),
    }
}

/// `base` with the trial's parameters and seed in `[ppo]` (or `[sac]` for a SAC trial) and `[env]`;
/// refused (naming the key) when the result is not a valid config. A PPO parameter goes into the shape
/// (`PpoShape`: trials of other values train apart) or into the values each trial keeps (`PpoTuned`).
pub(crate) fn apply(base: &Config, params: &Params, seed: u64) -> Result<Config, Invalid> {
    let mut c = base.clone();
    let sac = algorithm(&base.tune, params)? == Algorithm::Sac;
    let (mut shape, mut tuned) = c.ppo.split();
    let hidden = if sac { &c.sac.hidden } else { &shape.hidden };
    let (mut width, mut depth) = (hidden.first().copied().unwrap_or(64), hidden.len().max(1));
    for (name, &x) in params {
        match name.as_str() {
            ALGORITHM => {}
            "learning_rate" if sac => (c.sac.actor_learning_rate, c.sac.critic_learning_rate) = (x, x),
            "batch_size" if sac => c.sac.batch_size = whole(name, x)?,
            "gamma" if sac => c.sac.gamma = x,
            "tau" => c.sac.tau = x,
            "learning_rate" => tuned.learning_rate = x,
            "n_steps" => shape.n_steps = whole(name, x)?,
            "batch_size" => shape.batch_size = whole(name, x)?,
            "n_epochs" => shape.n_epochs = whole(name, x)?,
            "clip_range" => tuned.clip_range = x,
            "ent_coef" => tuned.ent_coef = x,
            "gamma" => tuned.gamma = x,
            "gae_lambda" => tuned.gae_lambda = x,
            "width" => width = whole(name, x)? as i64,
            "depth" => depth = whole(name, x)?,
            "reward_scale" => c.env.reward_scale = x,
            "trailing_stop" => c.env.exec.trailing_stop = x,
            "cooldown" => c.env.exec.cooldown_bars = whole(name, x)? as u32,
            other => return Err(Invalid::Value(format!("tune.space.{other}: not a tunable parameter"))),
        }
    }
    if params.contains_key("width") || params.contains_key("depth") {
        *(if sac { &mut c.sac.hidden } else { &mut shape.hidden }) = vec![width; depth];
    }
    tuned.seed = seed;
    c.ppo = PpoConfig::from_parts(shape, tuned, c.ppo.cpu_backend);
    (c.sac.seed, c.env.seed) = (seed, seed);
    if sac {
        c.sac.validate()?;
    } else {
        c.ppo.validate()?;
    }
    if !(0.0..1.0).contains(&c.env.exec.trailing_stop) || c.env.reward_scale <= 0.0 {
        return Err(Invalid::Value("tune.space: trailing_stop must be in [0, 1) and reward_scale above 0".into()));
    }
    Ok(c)
}
