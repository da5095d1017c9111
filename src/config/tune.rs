//! The `[tune]` section: how `tradebot tune ppo` (and a weekend retrain with `retrain.tune = true`)
//! searches PPO's hyper-parameters: the sampler and its seed, the validation metric and the days held out
//! for it, the trial budget and its rungs for early stopping, and the search space (`[tune.space]`).

use super::checker::Invalid;
use crate::models::Algorithm;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The search-space parameter that names a trial's algorithm (`tune.algorithms`): its value is the
/// algorithm's code, its place in `Algorithm::ALL` (0 ppo, 1 sac).
pub(crate) const ALGORITHM: &str = "algorithm";

/// The parameters a search may vary (a `[tune.space]` key must be one of them). A SAC trial takes
/// `learning_rate` (actor's and critics'), `batch_size`, `gamma`, `width`, `depth` and `tau` as its own and
/// the env's; PPO's own (`n_steps`, `n_epochs`, `clip_range`, `ent_coef`, `gae_lambda`) do not change it.
pub(crate) const TUNABLE: [&str; 14] = [
    "learning_rate",
    "n_steps",
    "batch_size",
    "n_epochs",
    "clip_range",
    "ent_coef",
    "gamma",
    "gae_lambda",
    "width",
    "depth",
    "reward_scale",
    "trailing_stop",
    "cooldown",
    "tau",
];

/// Which sampler proposes the next trial's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SamplerKind {
    /// Independent uniform draws (log-uniform for `log` ranges).
    Random,
    /// The tree-structured Parzen estimator of Bergstra, Bardenet, Bengio and Kégl, "Algorithms for
    /// Hyper-Parameter Optimization" (NeurIPS 2011), one parameter at a time.
    Tpe,
}

impl SamplerKind {
    /// Its name in the config and in a study record: `random` or `tpe`.
    pub fn as_str(self) -> &'static str {
        match self {
            SamplerKind::Random => "random",
            SamplerKind::Tpe => "tpe",
        }
    }
}

/// The validation figure trials are ranked by (higher is better).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneMetric {
    /// Annualised Sharpe ratio of the engine's backtest over the validation days.
    Sharpe,
    /// Total return of that backtest.
    TotalReturn,
}

impl TuneMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            TuneMetric::Sharpe => "sharpe",
            TuneMetric::TotalReturn => "total_return",
        }
    }
}

/// One parameter's range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Dist {
    /// A float drawn log-uniformly in [low, high].
    Log { low: f64, high: f64 },
    /// A float drawn uniformly in [low, high].
    Linear { low: f64, high: f64 },
    /// A whole number in [low, high].
    Int { low: i64, high: i64 },
    /// One of these values.
    Choice { values: Vec<f64> },
}

impl Dist {
    fn check(&self, name: &str) -> Result<(), Invalid> {
        let bad = match self {
            Dist::Log { low, high } if !(*low > 0.0 && low < high && high.is_finite()) => {
                Some(format!("a log range needs 0 < low < high, got [{low}, {high}]"))
            }
            Dist::Linear { low, high } if !(low < high && low.is_finite() && high.is_finite()) => {
                Some(format!("a linear range needs low < high, got [{low}, {high}]"))
            }
            Dist::Int { low, high } if low > high => {
                Some(format!("an int range needs low <= high, got [{low}, {high}]"))
            }
            Dist::Choice { values } if values.is_empty() || values.iter().any(|v| !v.is_finite()) => {
                Some("a choice needs at least one finite value".into())
            }
            _ => None,
        };
        match bad {
            Some(why) => Err(Invalid::Value(format!("tune.space.{name}: {why}"))),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TuneConfig {
    pub sampler: SamplerKind,
    /// Seeds the sampler and every trial's own seed: the same seed gives the same trials.
    pub seed: u64,
    /// TPE: trials drawn at random before the estimator models the results.
    pub startup_trials: usize,
    pub metric: TuneMetric,
    /// The last days of the `[train]` range, kept out of the trials' training and backtested by the
    /// engine's rules to rank them (the `[train]` holdout stays for the promotion gate).
    pub validation_days: usize,
    /// Trials per search (`--trials`).
    pub trials: usize,
    /// Trials training at once (`--parallel`); on a CPU they share its cores.
    pub parallel: usize,
    /// Environment steps of a trial that is never stopped (`--budget-steps`).
    pub budget_steps: u64,
    /// The first rung: a trial is first judged after this many steps.
    pub min_steps: u64,
    /// Successive halving's reduction factor: at each rung, a trial goes on only if it is in the best
    /// 1/`reduction` of the trials judged there so far. 1 disables early stopping.
    pub reduction: u64,
    /// The algorithms a trial may train (`["ppo"]` by default; `["ppo", "sac"]`: the search chooses, a
    /// categorical parameter `algorithm` of the space, as `retrain.algorithms` names them).
    pub algorithms: Vec<Algorithm>,
    /// The ranges searched; an empty table means `default_space()`.
    pub space: BTreeMap<String, Dist>,
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            sampler: SamplerKind::Tpe,
            seed: 0,
            startup_trials: 8,
            metric: TuneMetric::Sharpe,
            validation_days: 120,
            trials: 32,
            parallel: 4,
            budget_steps: 100_000,
            min_steps: 11_112,
            reduction: 3,
            algorithms: vec![Algorithm::Ppo],
            space: BTreeMap::new(),
        }
    }
}

/// An algorithm's code as the search space holds it: its place in `Algorithm::ALL`.
pub(super) fn code(a: Algorithm) -> f64 {
    Algorithm::ALL.iter().position(|x| *x == a).unwrap_or(0) as f64
}

/// The algorithm of a code (`code`), or `None` for a number that is none.
pub(crate) fn algorithm_of_code(x: f64) -> Option<Algorithm> {
    (x.is_finite() && x >= 0.0 && x.fract() == 0.0).then(|| Algorithm::ALL.get(x as usize).copied()).flatten()
}

/// The search space when `[tune.space]` is empty: every tunable parameter over a range around the
/// defaults of `[ppo]` and `[env]`.
pub(crate) fn default_space() -> BTreeMap<String, Dist> {
    let choice = |v: &[f64]| Dist::Choice { values: v.to_vec() };
    BTreeMap::from([
        ("learning_rate".into(), Dist::Log { low: 1e-5, high: 1e-3 }),
        ("n_steps".into(), choice(&[64.0, 128.0, 256.0, 512.0])),
        ("batch_size".into(), choice(&[64.0, 128.0, 256.0])),
        ("n_epochs".into(), Dist::Int { low: 3, high: 10 }),
        ("clip_range".into(), Dist::Linear { low: 0.1, high: 0.3 }),
        ("ent_coef".into(), Dist::Log { low: 1e-6, high: 1e-2 }),
        ("gamma".into(), Dist::Linear { low: 0.95, high: 0.999 }),
        ("gae_lambda".into(), Dist::Linear { low: 0.8, high: 0.99 }),
        ("width".into(), choice(&[64.0, 128.0, 256.0])),
        ("depth".into(), Dist::Int { low: 1, high: 3 }),
        ("reward_scale".into(), Dist::Log { low: 1e-5, high: 1e-3 }),
        ("trailing_stop".into(), Dist::Linear { low: 0.0, high: 0.2 }),
        ("cooldown".into(), Dist::Int { low: 0, high: 5 }),
    ])
}

impl TuneConfig {
    /// The ranges searched: `[tune.space]`, or `default_space()` (and SAC's `tau` where SAC is searched)
    /// when it is empty; and, where
    /// `tune.algorithms` is other than PPO alone, the choice of algorithm (`ALGORITHM`, by code).
    pub fn space(&self) -> BTreeMap<String, Dist> {
        let mut space = if self.space.is_empty() { default_space() } else { self.space.clone() };
        if self.space.is_empty() && self.algorithms.contains(&Algorithm::Sac) {
            // SAC's own: the target critics' Polyak rate, around its default of 0.005.
            space.insert("tau".into(), Dist::Log { low: 1e-3, high: 5e-2 });
        }
        if self.algorithms != [Algorithm::Ppo] {
            space.insert(ALGORITHM.into(), Dist::Choice { values: self.algorithms.iter().map(|a| code(*a)).collect() });
        }
        space
    }

    /// Checks ranges and names; the message names the key and the fix.
    pub fn validate(&self) -> Result<(), Invalid> {
        for (name, dist) in &self.space {
            if name == ALGORITHM {
                return Err(Invalid::Value(format!(
                    "tune.space.{ALGORITHM}: the algorithms are chosen by tune.algorithms, e.g. tune.algorithms = [\"ppo\", \"sac\"]; remove it from [tune.space]"
                )));
            }
            if !TUNABLE.contains(&name.as_str()) {
                return Err(Invalid::Value(format!(
                    "tune.space.{name}: not a tunable parameter; use one of {}",
                    TUNABLE.join(", ")
                )));
            }
            dist.check(name)?;
        }
        let mut seen = Vec::new();
        for a in &self.algorithms {
            if seen.contains(a) {
                return Err(Invalid::Value(format!("tune.algorithms names {a} twice; name each algorithm once")));
            }
            seen.push(*a);
        }
        let checks: [(&str, bool); 7] = [
            (
                "tune.algorithms must name at least one algorithm, e.g. [\"ppo\"] or [\"ppo\", \"sac\"]",
                !self.algorithms.is_empty(),
            ),
            ("tune.trials must be at least 1", self.trials >= 1),
            ("tune.parallel must be at least 1", self.parallel >= 1),
            ("tune.budget_steps must be at least 1", self.budget_steps >= 1),
            (
                "tune.min_steps must be in [1, tune.budget_steps]",
                self.min_steps >= 1 && self.min_steps <= self.budget_steps,
            ),
            ("tune.reduction must be at least 1 (1: no early stopping)", self.reduction >= 1),
            ("tune.validation_days must be at least 20 (a backtest needs bars to rank on)", self.validation_days >= 20),
        ];
        if let Some((msg, _)) = checks.iter().find(|(_, ok)| !ok) {
            return Err(Invalid::Value(msg.to_string()));
        }
        super::within("tune.trials", self.trials as u64, 1, 100_000)?;
        super::within("tune.parallel", self.parallel as u64, 1, 256)?;
        super::within("tune.startup_trials", self.startup_trials as u64, 0, 100_000)?;
        super::within("tune.budget_steps", self.budget_steps, 1, 10_000_000_000)?;
        super::within("tune.reduction", self.reduction, 1, 1_000)?;
        super::within("tune.validation_days", self.validation_days as u64, 20, 36_500)
    }

    /// The rungs (environment steps) where trials are judged: `min_steps × reduction^k` below the budget,
    /// then the budget itself.
    pub fn rungs(&self) -> Vec<u64> {
        let mut rungs = Vec::new();
        if self.reduction > 1 {
            let mut r = self.min_steps;
            while r < self.budget_steps {
                rungs.push(r);
                r = r.saturating_mul(self.reduction);
            }
        }
        rungs.push(self.budget_steps);
        rungs
    }
}
