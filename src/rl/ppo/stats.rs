//! What one PPO update did, from the values read back after it: the same statistics for the libtorch
//! update, the native CPU trainer and a population's trials.

use super::PpoError;

/// What one update did, for progress bars, JSON lines and tests.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UpdateStats {
    /// The update's number, from 1.
    pub update: u64,
    /// Environment steps trained on so far, all envs counted.
    pub env_steps: u64,
    /// Environment steps per second of wall time over the update (rollout and update together).
    pub steps_per_sec: f64,
    /// Mean return of the last (up to) 20 finished episodes; for an env that sums returns on the device
    /// (the env kernel), of the episodes of the last update that finished any.
    pub mean_return: Option<f64>,
    /// Episodes finished so far.
    pub episodes: u64,
    /// The approximate KL divergence between the rollout's policy and the updated one (mean over minibatches).
    pub approx_kl: f64,
    /// The fraction of samples whose probability ratio was clipped.
    pub clip_fraction: f64,
    /// How much of the returns' variance the value function explains (1 is perfect, 0 or below is none).
    pub explained_variance: f64,
    /// The clipped surrogate loss (mean over minibatches).
    pub policy_loss: f64,
    /// The value loss (mean over minibatches).
    pub value_loss: f64,
    /// The policy's entropy (mean over minibatches).
    pub entropy: f64,
    /// The learning rate of the update (after annealing).
    pub learning_rate: f64,
    /// Epochs the update ran (fewer than `n_epochs` when `target_kl` stopped it).
    pub epochs_run: usize,
}

/// An update's statistics from the eight values read back after it (the sums over its `batches`
/// minibatches of the loss, policy loss, value loss, approximate KL and clip fraction; the variance of the
/// returns and of their residuals; the entropy); a loss that is not finite is reported as divergence at
/// update `update`.
pub(super) fn update_stats(v: &[f64], batches: usize, epochs_run: usize, update: u64) -> Result<UpdateStats, PpoError> {
    let [loss, pl, vl, kl, cf, var_ret, var_resid, entropy] = v[..] else {
        return Err(PpoError::Readback { values: v.len(), expected: 8 });
    };
    if !loss.is_finite() {
        return Err(PpoError::Diverged("loss", update));
    }
    let b = batches.max(1) as f64;
    Ok(UpdateStats {
        update: 0,
        env_steps: 0,
        steps_per_sec: 0.0,
        mean_return: None,
        episodes: 0,
        approx_kl: kl / b,
        clip_fraction: cf / b,
        explained_variance: if var_ret > 0.0 { 1.0 - var_resid / var_ret } else { 0.0 },
        policy_loss: pl / b,
        value_loss: vl / b,
        entropy,
        learning_rate: 0.0,
        epochs_run,
    })
}
