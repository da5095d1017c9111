//! The `[retrain]` section: when the daemon retrains (a cron expression in a time zone), with what budget
//! the training child runs, and the promotion gate a candidate must pass on the holdout.

use super::Checker;
use super::raw::RawRetrain;
use crate::models::Algorithm;
use crate::schedule::Schedule;
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrainConfig {
    pub enabled: bool,
    #[serde(serialize_with = "ser_schedule")]
    pub schedule: Schedule,
    /// The training child is killed when it runs longer than this.
    #[serde(serialize_with = "super::ser_secs")]
    pub time_budget: Duration,
    /// Cap on the child's GPU memory, in MiB (passed to it; 0 = no cap).
    pub gpu_memory_mb: u64,
    /// Cap on the child's memory, in MiB (0 = no cap; unset = three quarters of the machine's memory,
    /// `retrain::memory::default_budget_mb`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// PPO environment steps per retrain; `None` = `tradebot train ppo`'s default.
    pub ppo_steps: Option<u64>,
    /// SAC environment steps per retrain (`retrain.algorithms` with "sac"); `None` = `tradebot train
    /// sac`'s default.
    pub sac_steps: Option<u64>,
    /// LSTM epoch cap per retrain; `None` = `lstm.max_epochs`.
    pub lstm_epochs: Option<u64>,
    /// A PPO retrain runs a small hyper-parameter search (`tradebot tune ppo`, `[tune]`) within its time
    /// budget instead of one training run; the best trial's model goes to the gate.
    pub tune: bool,
    /// A PPO retrain's candidate starts from the champion's training state (its actor, critic and
    /// observation statistics, kept with the model in the registry) and trains `ppo_steps` more on the new
    /// window: the weekend retrain refines the model that trades instead of drawing a new one. Where that
    /// cannot be done (no PPO champion, a champion without its state or with a corrupt one, another
    /// network or observation/action contract than the config's) the candidate trains from scratch and the
    /// run's record says why. Not for a search (`tune`) or SAC. Default true.
    pub warm_start: bool,
    /// The policy algorithms each policy retrain trains a candidate of (`["ppo"]` by default; `["ppo",
    /// "sac"]`: FinRL's ensemble). Every candidate is judged by the same holdout evaluator and gate; the
    /// best that passes (by holdout Sharpe) is promoted.
    #[serde(serialize_with = "ser_algorithms")]
    pub algorithms: Vec<Algorithm>,
    pub gate: GateConfig,
}

/// A candidate replaces the champion only if, on the holdout, in the same backtest, its lead is real with
/// `confidence` (paired block bootstrap of per-bar returns), it beats the champion's Sharpe ratio by
/// `min_sharpe_margin`, stays within `max_drawdown`, trades at least `min_trades` times, and trails
/// buy-and-hold's return by at most `max_buy_hold_shortfall` (or the champion's own shortfall, when larger). `folds`: the holdout's consecutive folds
/// whose returns each decision shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateConfig {
    pub min_sharpe_margin: f64,
    pub max_drawdown: f64,
    pub min_trades: u64,
    pub confidence: f64,
    pub folds: usize,
    pub max_buy_hold_shortfall: f64,
    /// What "better" means without a champion: set from `env.reward` (`Reward::objective`), the one place
    /// the config says it, so that the gate and the training reward agree.
    #[serde(skip)]
    pub objective: crate::env::Objective,
}

fn ser_algorithms<S: serde::Serializer>(a: &[Algorithm], ser: S) -> Result<S::Ok, S::Error> {
    ser.collect_seq(a.iter().map(|a| a.as_str()))
}

fn ser_schedule<S: serde::Serializer>(s: &Schedule, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(&format!("{} ({})", s.spec(), s.zone()))
}

impl Checker {
    pub(super) fn retrain(&mut self, r: RawRetrain) -> RetrainConfig {
        let spec = r.schedule.as_deref().unwrap_or(Schedule::DEFAULT_SPEC);
        let zone = r.timezone.as_deref().unwrap_or(Schedule::DEFAULT_ZONE);
        let schedule = match Schedule::parse(spec, zone) {
            Ok(s) => s,
            Err(e) => {
                self.problem(format!("retrain.schedule / retrain.timezone: {e}"));
                Schedule::parse(Schedule::DEFAULT_SPEC, Schedule::DEFAULT_ZONE)
                    .unwrap_or_else(|_| unreachable!("the default schedule parses (tested)"))
            }
        };
        let budget =
            self.range("retrain.time_budget_secs", r.time_budget_secs, 3600.0, (0.0, false), (7.0 * 86400.0, true));
        let ppo_steps = self.count_opt("retrain.ppo_steps", r.ppo_steps, 1, 10_000_000_000);
        let sac_steps = self.count_opt("retrain.sac_steps", r.sac_steps, 1, 10_000_000_000);
        let lstm_epochs = self.count_opt("retrain.lstm_epochs", r.lstm_epochs, 1, 100_000);
        // Sizes in MiB: a GPU of 1 TiB, a machine of 16 TiB.
        let gpu_memory_mb = self.count("retrain.gpu_memory_mb", r.gpu_memory_mb, 0, 0, 1 << 20);
        let memory_mb = self.count_opt("retrain.memory_mb", r.memory_mb, 0, 1 << 24);
        let algorithms = self.algorithms(r.algorithms);
        RetrainConfig {
            enabled: r.enabled.unwrap_or(true),
            schedule,
            time_budget: Duration::from_secs_f64(budget),
            gpu_memory_mb,
            memory_mb,
            ppo_steps,
            sac_steps,
            lstm_epochs,
            tune: r.tune.unwrap_or(false),
            warm_start: r.warm_start.unwrap_or(true),
            algorithms,
            gate: GateConfig {
                min_sharpe_margin: self.range(
                    "retrain.min_sharpe_margin",
                    r.min_sharpe_margin,
                    0.05,
                    (-10.0, true),
                    (10.0, true),
                ),
                max_drawdown: self.range("retrain.max_drawdown", r.max_drawdown, 0.3, (0.0, false), (1.0, true)),
                min_trades: self.count("retrain.min_trades", r.min_trades, 5, 0, 1_000_000),
                confidence: self.range("retrain.confidence", r.confidence, 0.9, (0.0, true), (1.0, false)),
                folds: match r.folds {
                    Some(k @ 1..=20) => k as usize,
                    None => 4,
                    Some(k) => {
                        self.problem(format!("retrain.folds = {k}: use 1 to 20 folds of the holdout"));
                        4
                    }
                },
                max_buy_hold_shortfall: self.range(
                    "retrain.max_buy_hold_shortfall",
                    r.max_buy_hold_shortfall,
                    0.05,
                    (0.0, true),
                    (10.0, true),
                ),
                objective: Default::default(),
            },
        }
    }
}

impl Checker {
    /// `retrain.algorithms`: known names, none twice, at least one.
    fn algorithms(&mut self, names: Option<Vec<String>>) -> Vec<Algorithm> {
        let Some(names) = names else { return vec![Algorithm::Ppo] };
        let mut out = Vec::new();
        for n in &names {
            match Algorithm::parse(n) {
                Some(a) if out.contains(&a) => {
                    self.problem(format!("retrain.algorithms names \"{n}\" twice: list each algorithm once"))
                }
                Some(a) => out.push(a),
                None => {
                    let all: Vec<String> = Algorithm::ALL.iter().map(|a| format!("\"{a}\"")).collect();
                    self.problem(format!("retrain.algorithms: \"{n}\" is not an algorithm; use {}", all.join(" or ")))
                }
            }
        }
        if names.is_empty() {
            self.problem("retrain.algorithms = []: name at least one, e.g. [\"ppo\"] or [\"ppo\", \"sac\"]".into());
        }
        if out.is_empty() { vec![Algorithm::Ppo] } else { out }
    }
}
