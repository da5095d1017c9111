//! The `[train]` section: which stored bars the trainers learn from and which they never see (the holdout
//! that the promotion gate backtests on), and how often they checkpoint.

use super::Checker;
use super::checker::Invalid;
use super::raw::RawTrain;
use chrono::{Datelike, NaiveDate};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainConfig {
    /// First day of training data (inclusive); `None` = the first stored bar.
    pub from: Option<NaiveDate>,
    /// Last day of training data (inclusive); `None` = the day before `holdout_from`, or the last stored bar.
    pub to: Option<NaiveDate>,
    /// The holdout period (inclusive), never trained on; `None` = no holdout.
    pub holdout_from: Option<NaiveDate>,
    pub holdout_to: Option<NaiveDate>,
    /// Write a checkpoint every this many updates (PPO) or epochs (LSTM).
    pub checkpoint_every: usize,
    /// A rolling window instead of fixed dates: train on the `window_days` days before the holdout, which
    /// is the last `holdout_days` days up to the day a run starts (the engine's clock; today for a manual
    /// `tradebot train`). Each weekend's retrain then learns from the newest bars.
    pub rolling: Option<Rolling>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rolling {
    pub window_days: u32,
    pub holdout_days: u32,
}

/// The environment variable naming the day a training child resolves a rolling `[train]` window at
/// (YYYY-MM-DD; the retrain pipeline sets it from the engine's clock).
pub(crate) const AS_OF_ENV: &str = "TRADEBOT_TRAIN_AS_OF";

/// The environment variable carrying the seed a retrain's training child trains with (the pipeline sets
/// it, `retrain_seed`); it replaces `ppo.seed`, `env.seed` and `lstm.seed`.
pub(crate) const SEED_ENV: &str = "TRADEBOT_TRAIN_SEED";

/// The seed of a retrain on `as_of`: a hash of the day (splitmix64), so that retrains on different days
/// start from different weights and episodes even on the same data, and a rerun on the same day repeats.
/// 63 bits: libtorch takes a signed seed.
pub(crate) fn retrain_seed(as_of: NaiveDate) -> u64 {
    let mut z = (as_of.num_days_from_ce() as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) >> 1
}

#[cfg(feature = "train")]
/// `$TRADEBOT_TRAIN_SEED`, when set; a malformed value is an error naming the variable.
pub(crate) fn seed_from_env() -> Result<Option<u64>, Invalid> {
    match std::env::var(SEED_ENV) {
        Ok(v) => v.trim().parse().map(Some).map_err(|e| {
            Invalid::Value(format!("{SEED_ENV}={v:?} is not a seed (a whole number: {e}); unset it or fix it"))
        }),
        Err(_) => Ok(None),
    }
}

impl TrainConfig {
    /// The concrete dates on `as_of`: a rolling window becomes `from`, `to`, `holdout_from` and
    /// `holdout_to` (the holdout ends on `as_of`); fixed dates are returned as they are.
    pub fn resolve(&self, as_of: NaiveDate) -> TrainConfig {
        let Some(r) = self.rolling else { return self.clone() };
        let days = |n: u32| chrono::Days::new(u64::from(n));
        let holdout_from = as_of.checked_sub_days(days(r.holdout_days.saturating_sub(1))).unwrap_or(as_of);
        let to = holdout_from.pred_opt().unwrap_or(holdout_from);
        let from = to.checked_sub_days(days(r.window_days.saturating_sub(1))).unwrap_or(to);
        TrainConfig {
            from: Some(from),
            to: Some(to),
            holdout_from: Some(holdout_from),
            holdout_to: Some(as_of),
            checkpoint_every: self.checkpoint_every,
            rolling: None,
        }
    }

    /// `resolve` on the day named by `$TRADEBOT_TRAIN_AS_OF`, else on `fallback`. A malformed value is an
    /// error naming the variable.
    pub fn resolve_from_env(&self, fallback: NaiveDate) -> Result<TrainConfig, Invalid> {
        let as_of = match std::env::var(AS_OF_ENV) {
            Ok(v) => NaiveDate::parse_from_str(v.trim(), "%Y-%m-%d").map_err(|e| {
                Invalid::Value(format!("{AS_OF_ENV}={v:?} is not a YYYY-MM-DD date ({e}); unset it or fix it"))
            })?,
            Err(_) => fallback,
        };
        Ok(self.resolve(as_of))
    }

    /// The last training day: `to`, else the day before the holdout starts.
    pub fn train_end(&self) -> Option<NaiveDate> {
        self.to.or_else(|| self.holdout_from.and_then(|d| d.pred_opt()))
    }
}

impl Checker {
    pub(super) fn train(&mut self, r: RawTrain) -> TrainConfig {
        let t = TrainConfig {
            from: self.date("train.from", r.from.as_deref()),
            to: self.date("train.to", r.to.as_deref()),
            holdout_from: self.date("train.holdout_from", r.holdout_from.as_deref()),
            holdout_to: self.date("train.holdout_to", r.holdout_to.as_deref()),
            checkpoint_every: self.count("train.checkpoint_every", r.checkpoint_every, 10, 1, 1_000_000) as usize,
            rolling: None,
        };
        let mut t = t;
        match (r.window_days, r.holdout_days) {
            (None, None) => {}
            (Some(w), h) => {
                if t.from.is_some() || t.to.is_some() || t.holdout_from.is_some() || t.holdout_to.is_some() {
                    self.problem(
                        "train.window_days with fixed train dates: use either window_days (and holdout_days) or from / to / holdout_from / holdout_to".into(),
                    );
                }
                let h = h.unwrap_or(182);
                if w > 36_500 || h > 3_650 {
                    self.problem(format!(
                        "train.window_days = {w}, train.holdout_days = {h}: use at most 36500 days (100 years) of training data and 3650 of holdout"
                    ));
                } else if w < 30 || h < 20 {
                    self.problem(format!(
                        "train.window_days = {w}, train.holdout_days = {h}: use at least 30 days of training data and 20 of holdout"
                    ));
                }
                t.rolling = Some(Rolling { window_days: w, holdout_days: h });
            }
            (None, Some(_)) => {
                self.problem("train.holdout_days needs train.window_days (the rolling window's length)".into());
            }
        }
        let pairs = [
            ("train.from", t.from, "train.to", t.to),
            ("train.holdout_from", t.holdout_from, "train.holdout_to", t.holdout_to),
        ];
        for (ka, a, kb, b) in pairs {
            if let (Some(a), Some(b)) = (a, b)
                && a > b
            {
                self.problem(format!("{ka} = {a} is after {kb} = {b}: swap them"));
            }
        }
        if let (Some(end), Some(h)) = (t.train_end(), t.holdout_from)
            && end >= h
        {
            self.problem(format!(
                "train.to = {end} is not before train.holdout_from = {h}: the holdout must come after the training data, or the promotion gate would test on bars the model trained on"
            ));
        }
        t
    }
}
