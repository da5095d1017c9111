//! One gradient step of the native trainer on a minibatch: the PPO loss and its gradient written by hand
//! (torch's subgradients at the kinks), the global gradient-norm clip and Adam, libtorch's formulas.

use super::super::lanes::{AdamStep, adam};
use super::super::net::{backward, forward};
use super::super::{PpoConfig, PpoError};
use super::{ADAM_EPS, BETA1, BETA2, Batch, HALF_LN_2PI, MbStats, Native};

/// The minibatch's sums of the policy loss, the value loss (before their means), the approximate KL and
/// the clipped samples, with the log-std's gradient from the policy loss.
struct LossSums {
    pg: f64,
    vl: f64,
    kl: f64,
    clipped: usize,
    dls: Vec<f32>,
}

fn in_range(x: f32, lo: f32, hi: f32) -> bool {
    x >= lo && x <= hi
}

/// Half of torch's gradient at a tie of minimum/maximum goes to each side.
fn pick(first_wins: bool, second_wins: bool, g1: f32, g2: f32) -> f32 {
    if first_wins {
        g1
    } else if second_wins {
        g2
    } else {
        0.5 * g1 + 0.5 * g2
    }
}

impl Native {
    /// One gradient step on a minibatch: the loss, its gradient by hand, the global-norm clip, Adam.
    pub(crate) fn minibatch(
        &mut self,
        cfg: &PpoConfig,
        lr: f64,
        adam_steps: &mut u64,
        b: &Batch<'_>,
        update: u64,
    ) -> Result<MbStats, PpoError> {
        let n = b.old_log_prob.len();
        let act = self.activation;
        let mut adv = std::mem::take(&mut self.adv);
        adv.clear();
        adv.extend_from_slice(b.advantage);
        if cfg.normalize_advantage && n > 1 {
            let mean = adv.iter().sum::<f32>() / n as f32;
            let std = (adv.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / (n - 1) as f32).sqrt();
            adv.iter_mut().for_each(|x| *x = (*x - mean) / (std + 1e-8));
        }
        forward(&self.params, &self.layout.actor, act, b.obs, n, &mut self.pi);
        forward(&self.params, &self.layout.critic, act, b.obs, n, &mut self.vf);
        let ls = self.log_std(cfg);
        let sums = self.loss_grads(cfg, b, &adv, &ls);
        self.adv = adv;
        let (pg, vl) = (sums.pg / n as f64, 0.5 * sums.vl / n as f64);
        let entropy: f64 = ls.iter().map(|l| (*l + HALF_LN_2PI + 0.5) as f64).sum();
        let loss = pg + cfg.vf_coef * vl - cfg.ent_coef * entropy;
        if !loss.is_finite() {
            return Err(PpoError::Diverged("loss", update + 1));
        }
        self.backprop(cfg, b, &sums.dls);
        self.clip_and_step(cfg, lr, adam_steps);
        Ok(MbStats {
            loss,
            policy_loss: pg,
            value_loss: vl,
            approx_kl: sums.kl / n as f64,
            clip_fraction: sums.clipped as f64 / n as f64,
        })
    }

    /// The loss of each sample and its gradient with respect to the actor's mean (`dmean`), the critic's
    /// value (`dvalue`) and the log-std, from the forward passes in `pi` and `vf`.
    fn loss_grads(&mut self, cfg: &PpoConfig, b: &Batch<'_>, adv: &[f32], ls: &[f32]) -> LossSums {
        let n = b.old_log_prob.len();
        let a = self.layout.act_dim;
        let mean = self.pi.0.last().map(Vec::as_slice).unwrap_or_default();
        let value = self.vf.0.last().map(Vec::as_slice).unwrap_or_default();
        let std: Vec<f32> = ls.iter().map(|v| v.exp()).collect();
        let (clip, nf) = (cfg.clip_range as f32, n as f32);
        let (lo, hi) = (1.0 - clip, 1.0 + clip);
        self.dmean.clear();
        self.dmean.resize(n * a, 0.0);
        self.dvalue.clear();
        self.dvalue.resize(n, 0.0);
        let mut dls = vec![0.0f32; a];
        let (mut pg, mut vl, mut kl, mut clipped) = (0.0f64, 0.0f64, 0.0f64, 0usize);
        for i in 0..n {
            let mut lp = 0.0f32;
            for j in 0..a {
                let z = (b.actions[i * a + j] - mean[i * a + j]) / std[j];
                lp += z * z * -0.5 - ls[j] - HALF_LN_2PI;
            }
            let log_ratio = lp - b.old_log_prob[i];
            let ratio = log_ratio.exp();
            let (u, c) = (ratio * adv[i], ratio.clamp(lo, hi) * adv[i]);
            pg -= u.min(c) as f64;
            let d_ratio = -pick(u < c, c < u, adv[i], if in_range(ratio, lo, hi) { adv[i] } else { 0.0 }) / nf;
            let g_lp = d_ratio * ratio;
            for j in 0..a {
                let z = (b.actions[i * a + j] - mean[i * a + j]) / std[j];
                self.dmean[i * a + j] = g_lp * z / std[j];
                dls[j] += g_lp * (z * z - 1.0);
            }
            kl += ((ratio - 1.0) - log_ratio) as f64;
            clipped += usize::from((ratio - 1.0).abs() > clip);
            let (v, ret, ov) = (value[i], b.returns[i], b.old_value[i]);
            let dv = match cfg.clip_range_vf {
                Some(cv) => {
                    let cv = cv as f32;
                    let diff = v - ov;
                    let vc = ov + diff.clamp(-cv, cv);
                    let (e1, e2) = ((v - ret) * (v - ret), (vc - ret) * (vc - ret));
                    vl += e1.max(e2) as f64;
                    let g2 = if in_range(diff, -cv, cv) { 2.0 * (vc - ret) } else { 0.0 };
                    pick(e1 > e2, e2 > e1, 2.0 * (v - ret), g2)
                }
                None => {
                    vl += ((v - ret) * (v - ret)) as f64;
                    2.0 * (v - ret)
                }
            };
            self.dvalue[i] = cfg.vf_coef as f32 * 0.5 * dv / nf;
        }
        LossSums { pg, vl, kl, clipped, dls }
    }

    /// The gradients of every parameter: both networks backwards from `dmean` and `dvalue`; the log-std's
    /// from the policy loss and the entropy bonus (none where it sits clamped at a bound).
    fn backprop(&mut self, cfg: &PpoConfig, b: &Batch<'_>, dls: &[f32]) {
        let (n, act) = (b.old_log_prob.len(), self.activation);
        self.grads.iter_mut().for_each(|g| *g = 0.0);
        let (mut dy, mut dx) = (std::mem::take(&mut self.grad_a), std::mem::take(&mut self.grad_b));
        dy.clone_from(&self.dmean);
        backward(&self.params, &mut self.grads, &self.layout.actor, act, b.obs, n, &self.pi, &mut dy, &mut dx);
        dy.clone_from(&self.dvalue);
        backward(&self.params, &mut self.grads, &self.layout.critic, act, b.obs, n, &self.vf, &mut dy, &mut dx);
        (self.grad_a, self.grad_b) = (dy, dx);
        let (lo_s, hi_s) = (cfg.log_std_min as f32, cfg.log_std_max as f32);
        for (j, d) in dls.iter().enumerate() {
            let k = self.layout.log_std + j;
            let inside = in_range(self.params[k], lo_s, hi_s);
            self.grads[k] = if inside { d - cfg.ent_coef as f32 } else { 0.0 };
        }
    }

    /// The global gradient-norm clip (torch's formula), then one Adam step (libtorch's formula).
    fn clip_and_step(&mut self, cfg: &PpoConfig, lr: f64, adam_steps: &mut u64) {
        let total = sum_squares(&self.grads).sqrt();
        let coef = cfg.max_grad_norm / (total + 1e-6);
        if coef < 1.0 {
            let c = coef as f32;
            self.grads.iter_mut().for_each(|g| *g *= c);
        }
        *adam_steps += 1;
        let t = *adam_steps as i32;
        let (bc1, bc2) = (1.0 - BETA1.powi(t), 1.0 - BETA2.powi(t));
        let (b1, b2, eps) = (BETA1 as f32, BETA2 as f32, ADAM_EPS as f32);
        let (sqrt_bc2, step_size) = (bc2.sqrt() as f32, (lr / bc1) as f32);
        let step = AdamStep { b1, b2, eps, sqrt_bc2, step_size };
        adam(&step, &mut self.params, &self.grads, &mut self.adam_m, &mut self.adam_v);
    }
}

/// `Σ g²` in f64 over eight lanes: one chain of dependent additions over every parameter took a tenth of
/// a minibatch at SB3's default size.
fn sum_squares(g: &[f32]) -> f64 {
    let chunks = g.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
    let mut acc = [0f64; 8];
    for c in chunks {
        for l in 0..8 {
            acc[l] += f64::from(c[l]) * f64::from(c[l]);
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_squares_agrees_with_the_plain_sum() {
        let g: Vec<f32> = (0..1003).map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-3).collect();
        let want: f64 = g.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
        let got = sum_squares(&g);
        assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
        assert_eq!(sum_squares(&[3.0, 4.0]), 25.0, "the tail alone");
    }
}
