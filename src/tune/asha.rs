//! Early stopping by asynchronous successive halving (ASHA: Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur,
//! Hardt, Recht and Talwalkar, "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020), as a
//! stopping rule: a trial is judged at each rung (`TuneConfig::rungs`) against every value reported at
//! that rung so far, and goes on only if it is among the best `1 / reduction` of them (with fewer than
//! `reduction` values, only the best so far goes on). The last rung is the budget: a trial there is
//! complete. Higher values are better; a value that is not finite stops its trial.

/// What a trial does after reporting at a rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Continue,
    Prune,
    Complete,
}

#[derive(Debug, Clone)]
pub(crate) struct Asha {
    rungs: Vec<u64>,
    reduction: u64,
    reported: Vec<Vec<f64>>,
}

impl Asha {
    pub(crate) fn new(rungs: Vec<u64>, reduction: u64) -> Asha {
        let reported = vec![Vec::new(); rungs.len()];
        Asha { rungs, reduction, reported }
    }

    /// Records `value` at rung `rung` (its index) and says whether the trial goes on.
    pub(crate) fn report(&mut self, rung: usize, value: f64) -> Verdict {
        let last = rung + 1 >= self.rungs.len();
        if !value.is_finite() {
            return Verdict::Prune;
        }
        let Some(seen) = self.reported.get_mut(rung) else { return Verdict::Complete };
        seen.push(value);
        if last {
            return Verdict::Complete;
        }
        if self.reduction <= 1 {
            return Verdict::Continue;
        }
        let mut sorted = seen.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let k = (sorted.len() / self.reduction as usize).saturating_sub(1);
        if value >= sorted[k] { Verdict::Continue } else { Verdict::Prune }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_trial_goes_on_and_the_last_rung_completes() {
        let mut a = Asha::new(vec![10, 30, 90], 3);
        assert_eq!(a.report(0, 0.5), Verdict::Continue);
        assert_eq!(a.report(1, 0.5), Verdict::Continue);
        assert_eq!(a.report(2, 0.5), Verdict::Complete);
    }

    /// Below `reduction` values only the best so far goes on; from three on, the best third.
    #[test]
    fn only_the_best_share_at_a_rung_goes_on() {
        let mut a = Asha::new(vec![10, 30, 90], 3);
        assert_eq!(a.report(0, 1.0), Verdict::Continue);
        assert_eq!(a.report(0, 0.5), Verdict::Prune);
        assert_eq!(a.report(0, 2.0), Verdict::Continue);
        // Four values: the top one (4 / 3 = 1) goes on.
        assert_eq!(a.report(0, 1.5), Verdict::Prune);
        for v in [0.1, 0.2] {
            assert_eq!(a.report(0, v), Verdict::Prune);
        }
        // Seven values: the top two go on; 1.8 is second.
        assert_eq!(a.report(0, 1.8), Verdict::Continue);
        // Rungs are judged apart: the first value at rung 1 goes on whatever rung 0 saw.
        assert_eq!(a.report(1, -5.0), Verdict::Continue);
    }

    #[test]
    fn nan_stops_and_reduction_one_never_stops() {
        let mut a = Asha::new(vec![10, 30], 3);
        assert_eq!(a.report(0, f64::NAN), Verdict::Prune);
        let mut none = Asha::new(vec![10, 30], 1);
        assert_eq!(none.report(0, 1.0), Verdict::Continue);
        assert_eq!(none.report(0, -1.0), Verdict::Continue);
        assert_eq!(none.report(1, -1.0), Verdict::Complete);
    }
}
