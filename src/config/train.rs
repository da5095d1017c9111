//! The `[train]` section: which stored bars the trainers learn from and which they never see (the holdout
//! that the promotion gate backtests on), and how often they checkpoint.

use super::Checker;
use super::raw::RawTrain;
use chrono::NaiveDate;
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
}

impl TrainConfig {
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
            checkpoint_every: match r.checkpoint_every {
                Some(0) => {
                    self.problem("train.checkpoint_every = 0: must be at least 1".into());
                    1
                }
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
                None => 10,
            },
        };
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
