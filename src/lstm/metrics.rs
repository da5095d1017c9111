//! Classification metrics from a confusion matrix: accuracy, macro-F1 and the multiclass Matthews
//! correlation coefficient (Gorodkin's R_K), the early-stopping criterion.

/// `m[actual][predicted]` counts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Confusion {
    pub m: Vec<Vec<u64>>,
}

impl Confusion {
    pub(crate) fn new(classes: usize) -> Self {
        Confusion { m: vec![vec![0; classes]; classes] }
    }

    #[cfg(test)]
    pub(crate) fn from_pairs(classes: usize, actual: &[i64], predicted: &[i64]) -> Self {
        let mut c = Confusion::new(classes);
        for (a, p) in actual.iter().zip(predicted) {
            if let (Ok(a), Ok(p)) = (usize::try_from(*a), usize::try_from(*p))
                && a < classes
                && p < classes
            {
                c.m[a][p] += 1;
            }
        }
        c
    }

    fn total(&self) -> f64 {
        self.m.iter().flatten().sum::<u64>() as f64
    }

    pub(crate) fn accuracy(&self) -> f64 {
        let t = self.total();
        if t == 0.0 { 0.0 } else { (0..self.m.len()).map(|k| self.m[k][k]).sum::<u64>() as f64 / t }
    }

    /// Unweighted mean of the per-class F1 scores (a class never seen nor predicted scores 0).
    pub(crate) fn macro_f1(&self) -> f64 {
        let k = self.m.len();
        let f1: f64 = (0..k)
            .map(|c| {
                let tp = self.m[c][c] as f64;
                let fp = (0..k).map(|a| self.m[a][c]).sum::<u64>() as f64 - tp;
                let fn_ = self.m[c].iter().sum::<u64>() as f64 - tp;
                if tp == 0.0 { 0.0 } else { 2.0 * tp / (2.0 * tp + fp + fn_) }
            })
            .sum();
        f1 / k as f64
    }

    /// Multiclass MCC: (c·s − Σ p_k t_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²)); 0 when undefined.
    pub(crate) fn mcc(&self) -> f64 {
        let k = self.m.len();
        let s = self.total();
        let c: f64 = (0..k).map(|i| self.m[i][i] as f64).sum();
        let t: Vec<f64> = (0..k).map(|i| self.m[i].iter().sum::<u64>() as f64).collect();
        let p: Vec<f64> = (0..k).map(|j| (0..k).map(|i| self.m[i][j]).sum::<u64>() as f64).collect();
        let pt: f64 = p.iter().zip(&t).map(|(a, b)| a * b).sum();
        let den =
            ((s * s - p.iter().map(|x| x * x).sum::<f64>()) * (s * s - t.iter().map(|x| x * x).sum::<f64>())).sqrt();
        if den == 0.0 { 0.0 } else { (c * s - pt) / den }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_random_and_hand_computed() {
        let perfect = Confusion::from_pairs(3, &[0, 1, 2, 2], &[0, 1, 2, 2]);
        assert_eq!((perfect.accuracy(), perfect.macro_f1(), perfect.mcc()), (1.0, 1.0, 1.0));
        let constant = Confusion::from_pairs(3, &[0, 1, 2, 2], &[2, 2, 2, 2]);
        assert_eq!(constant.mcc(), 0.0, "a constant predictor carries no information");
        // Binary case against the textbook formula: tp=3, tn=4, fp=1, fn=2.
        let c = Confusion { m: vec![vec![4, 1], vec![2, 3]] };
        let want = (3.0 * 4.0 - 1.0 * 2.0) / ((4.0f64) * 5.0 * 5.0 * 6.0).sqrt();
        assert!((c.mcc() - want).abs() < 1e-12, "{} vs {want}", c.mcc());
        // F1 of class 1: 2*3/(2*3+1+2) = 6/9; class 0: 2*4/(8+2+1) = 8/11.
        assert!((c.macro_f1() - (6.0 / 9.0 + 8.0 / 11.0) / 2.0).abs() < 1e-12);
        assert!((c.accuracy() - 0.7).abs() < 1e-12);
    }

    #[test]
    fn out_of_range_labels_are_ignored() {
        let c = Confusion::from_pairs(3, &[0, 5, -1], &[0, 0, 0]);
        assert_eq!(c.total(), 1.0);
    }
}
