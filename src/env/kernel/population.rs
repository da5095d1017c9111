//! Many trials' envs as one: `TensorKernelEnv::stack` joins the envs of several trials (each built alone,
//! on the same panel and device) into one env whose step is one launch over all of them, each env stepping
//! with its own trial's tuned values (trailing stop, cooldown, reward scale) and episode-start stream
//! (`tb_trial` in the kernel). An env in a population moves exactly as in its trial's env alone (tested
//! bit for bit), so a search's trials do not depend on which others share the launch. `keep` drops the
//! trials a search has stopped.

use super::buffer::{mul_i32, sum_i32};
use super::cuda::KernelEnvError;
use super::state::TensorState;
use super::tensor::TensorKernelEnv;
use super::{Params, TrialEnv};
use crate::env::EnvError;
use tch::{Kind, Tensor};

fn unsupported(what: &'static str) -> KernelEnvError {
    EnvError::Unsupported(what).into()
}

/// The parameters of a trial's env with the per-trial values blanked out: what the trials must share.
fn shared_part(p: &Params) -> Params {
    Params { trailing_stop: 0.0, reward_scale: 0.0, seed: 0, cooldown_bars: 0, ..*p }
}

/// `tb_trial` as the kernel reads it (native byte order, `#[repr(C)]` layout: 8 + 8 + 8 + 4 + 4 bytes).
fn trial_bytes(trials: &[TrialEnv]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(trials));
    for t in trials {
        out.extend_from_slice(&t.trailing_stop.to_ne_bytes());
        out.extend_from_slice(&t.reward_scale.to_ne_bytes());
        out.extend_from_slice(&t.seed.to_ne_bytes());
        out.extend_from_slice(&t.cooldown_bars.to_ne_bytes());
        out.extend_from_slice(&t.pad.to_ne_bytes());
    }
    out
}

impl TensorKernelEnv {
    /// One env of the trials of `envs` (in order; an env already stacked brings all its trials), stepped
    /// by one launch. They must share the panel, device, env count and every value a search does not tune.
    pub fn stack(envs: Vec<TensorKernelEnv>) -> Result<TensorKernelEnv, KernelEnvError> {
        let mut iter = envs.into_iter();
        let Some(first) = iter.next() else { return Err(unsupported("a population needs at least one trial")) };
        let rest: Vec<TensorKernelEnv> = iter.collect();
        let per_trial = first.params.trial_envs;
        let key = |e: &TensorKernelEnv| Params { n_envs: 0, asset_stride: 0, env_stride: 0, ..shared_part(&e.params) };
        for e in &rest {
            if e.device != first.device {
                return Err(unsupported("a population's trials must be on one device"));
            }
            if e.params.trial_envs != per_trial || key(e) != key(&first) {
                return Err(unsupported(
                    "a population's trials must share the panel, env count and every env value a search does not tune",
                ));
            }
        }
        let all: Vec<&TensorKernelEnv> = std::iter::once(&first).chain(&rest).collect();
        let trials: Vec<TrialEnv> = all
            .iter()
            .flat_map(|e| e.trials.as_ref().map_or_else(|| vec![TrialEnv::of(&e.params)], |(t, _)| t.clone()))
            .collect();
        // The kernel indexes envs, positions and observation rows with `i32`, as `params` checks for one env.
        let n = sum_i32("the population's env count", all.iter().map(|e| e.params.n_envs))?;
        mul_i32("the population's positions", n, first.params.n_assets)?;
        mul_i32("the population's observation floats", n, first.params.obs_stride)?;
        // Positions are asset-major on CUDA (`TensorKernelEnv::new`), env-major on the CPU.
        let asset_major = first.device.is_cuda();
        let a = first.params.n_assets as i64;
        let states: Vec<&TensorState> = all.iter().map(|e| &e.state).collect();
        let params =
            Params { n_envs: n, asset_stride: if asset_major { n } else { 1 }, trial_envs: per_trial, ..first.params };
        let table = Tensor::f_from_slice(&trial_bytes(&trials))?.f_to_device(first.device)?;
        let stacked = TensorKernelEnv {
            params,
            device: first.device,
            has_turbulence: first.has_turbulence,
            has_benchmark: first.has_benchmark,
            state: TensorState::stack(&states, a, asset_major)?,
            trials: Some((trials, table)),
            panel: first.panel,
            backend: first.backend,
        };
        Ok(stacked)
    }

    /// How many trials' envs this env steps (1 for an env built by `new`).
    pub fn n_trials(&self) -> usize {
        self.trials.as_ref().map_or(1, |(t, _)| t.len())
    }

    /// Envs per trial.
    pub fn trial_envs(&self) -> usize {
        self.params.trial_envs as usize
    }

    /// Keeps the trials at positions `keep` (ascending, each below `n_trials`), in that order.
    pub fn keep(&mut self, keep: &[usize]) -> Result<(), KernelEnvError> {
        let p = self.n_trials();
        if keep.is_empty() || keep.windows(2).any(|w| w[0] >= w[1]) || keep.iter().any(|&k| k >= p) {
            return Err(unsupported("keep: the trials to keep must be ascending positions, at least one"));
        }
        let e = self.params.trial_envs as i64;
        let rows: Vec<i64> = keep.iter().flat_map(|&k| (k as i64 * e)..(k as i64 + 1) * e).collect();
        // Fewer rows than the env has: `n_envs` (an `i32`) bounds it.
        let n = i32::try_from(rows.len()).map_err(|_| unsupported("keep: more rows than the env has"))?;
        let idx = Tensor::f_from_slice(&rows)?.f_to_device(self.device)?;
        let asset_major = self.device.is_cuda();
        self.state.keep(&idx, self.params.n_assets as i64, asset_major)?;
        let trials: Vec<TrialEnv> = match &self.trials {
            Some((t, _)) => keep.iter().map(|&k| t[k]).collect(),
            None => vec![TrialEnv::of(&self.params)],
        };
        let table = Tensor::f_from_slice(&trial_bytes(&trials))?.f_to_device(self.device)?;
        self.trials = Some((trials, table));
        self.params.n_envs = n;
        if asset_major {
            self.params.asset_stride = n;
        }
        Ok(())
    }

    /// Each trial's finished episodes since the last call, (sum of total returns, count) per trial: one
    /// read back to the host for all of them; clears them.
    pub fn take_trial_returns(&mut self) -> Result<Vec<(f64, f64)>, KernelEnvError> {
        let p = self.n_trials() as i64;
        let per = |t: &Tensor| t.f_view([p, -1])?.f_sum_dim_intlist(1, false, Kind::Double);
        let (sums, counts) = (&mut self.state.ret_sum, &mut self.state.ret_count);
        let both = Tensor::f_stack(&[per(sums)?, per(counts)?], 1)?;
        let read = crate::ml::readback::f64s(&both);
        let _ = sums.f_zero_()?;
        let _ = counts.f_zero_()?;
        let v = read?;
        if v.len() != 2 * p as usize {
            return Err(KernelEnvError::Readback { what: "episode returns", got: v.len(), want: 2 * p as usize });
        }
        Ok(v.chunks(2).map(|c| (c[0], c[1])).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bits, f32_bits, panel_with_turbulence, random_actions};
    use super::*;
    use crate::env::{EnvConfig, StepOutcome};
    use tch::Device;

    fn host<T: tch::kind::Element>(t: &Tensor) -> Vec<T>
    where
        Vec<T>: TryFrom<Tensor, Error = tch::TchError>,
    {
        Vec::<T>::try_from(t.to_device(Device::Cpu).contiguous().view([-1])).unwrap()
    }

    /// Three trials with their own stops, cooldowns, reward scales and seeds, stepped as one env on `device`,
    /// then two of them after the middle one is dropped: each env moves bit for bit as in its trial's env
    /// alone. With share counts and the equity reward, then with target weights and the differential
    /// Sharpe ratio (whose moments and orders are stacked and kept too).
    pub(crate) fn assert_population_steps_as_alone(device: Device) {
        let shares = EnvConfig { n_envs: 5, episode_len: 12, ..Default::default() };
        let weights = EnvConfig {
            action: crate::exec::ActionSpace::Weights { band: 0.05, max_weight: 0.5 },
            reward: crate::env::Reward::DifferentialSharpe { eta: 0.05, turnover_bps: 10.0 },
            ..shares.clone()
        };
        for base in [shares, weights] {
            assert_trials_step_as_alone(device, &base);
        }
    }

    fn assert_trials_step_as_alone(device: Device, base: &EnvConfig) {
        let panel = panel_with_turbulence();
        let cfgs: Vec<EnvConfig> = [(0.02, 0u32, 1.0, 11u64), (0.0, 3, 0.5, 12), (0.05, 1, 2.0, 13)]
            .iter()
            .map(|&(stop, cooldown, scale, seed)| {
                let mut c = base.clone();
                c.exec.trailing_stop = stop;
                c.exec.cooldown_bars = cooldown;
                c.reward_scale = scale;
                c.seed = seed;
                c
            })
            .collect();
        let new = |c: &EnvConfig| TensorKernelEnv::new(c, &panel, device).unwrap();
        let mut alone: Vec<TensorKernelEnv> = cfgs.iter().map(new).collect();
        let mut pop = TensorKernelEnv::stack(cfgs.iter().map(new).collect()).unwrap();
        assert_eq!((pop.n_trials(), pop.trial_envs(), pop.n_envs()), (3, 5, 15));
        let mut members = vec![0, 1, 2];
        let a = panel.n_assets;
        let mut rng = crate::env::rng::SplitMix64::new(3);
        let (mut rewards_differ, mut ended) = (false, 0.0);
        for step in 0..60 {
            if step == 30 {
                pop.keep(&[0, 2]).unwrap();
                members = vec![0, 2];
                assert_eq!((pop.n_trials(), pop.n_envs()), (2, 10));
            }
            let mut all = Vec::new();
            for &m in &members {
                let mut actions = vec![0f32; 5 * a];
                random_actions(&mut rng, &mut actions);
                alone[m].step_host(&actions, &mut StepOutcome::default()).unwrap();
                all.extend(actions);
            }
            pop.step_host(&all, &mut StepOutcome::default()).unwrap();
            let (rows, cash) = (host::<f32>(pop.reward()), host::<f64>(&pop.state.cash));
            let holdings = pop.holdings().unwrap();
            for (k, &m) in members.iter().enumerate() {
                let at = format!("step {step}, trial {m}");
                let one = &alone[m];
                assert_eq!(f32_bits(&rows[k * 5..(k + 1) * 5]), f32_bits(&host::<f32>(one.reward())), "{at}: reward");
                assert_eq!(bits(&cash[k * 5..(k + 1) * 5]), bits(&one.cash().unwrap()), "{at}: cash");
                assert_eq!(
                    bits(&holdings[k * 5 * a..(k + 1) * 5 * a]),
                    bits(&one.holdings().unwrap()),
                    "{at}: holdings"
                );
                let obs = host::<f32>(&pop.obs().narrow(0, k as i64 * 5, 5));
                assert_eq!(f32_bits(&obs), f32_bits(&host::<f32>(one.obs())), "{at}: observation");
            }
            rewards_differ |= rows[..5] != rows[5..10];
            let r = pop.take_trial_returns().unwrap();
            for (k, &m) in members.iter().enumerate() {
                let own = alone[m].take_returns().unwrap();
                assert_eq!(r[k].1, own.1, "step {step}, trial {m}: episodes");
                assert!((r[k].0 - own.0).abs() <= 1e-12, "step {step}, trial {m}: returns {:?} vs {own:?}", r[k]);
                ended += own.1;
            }
        }
        assert!(rewards_differ, "the trials stepped alike: the test checks nothing");
        assert!(ended > 0.0, "no episode ended: the resets were not checked");
    }

    #[test]
    fn a_population_steps_each_trial_as_its_env_alone_and_keeps_doing_so_after_a_trial_leaves() {
        assert_population_steps_as_alone(Device::Cpu);
    }

    /// Needs a CUDA GPU (feature `gpu-tests`, `make test-gpu`): fails without one.
    #[cfg(feature = "gpu-tests")]
    mod gpu_tests {
        use super::*;

        /// The same on CUDA: the NVRTC build with positions asset-major, stacked and kept along the env axis.
        #[test]
        fn on_cuda_a_population_steps_each_trial_as_its_env_alone() {
            assert!(crate::runtime_libs::load_torch_cuda(), "no CUDA device: this test needs a GPU");
            assert_population_steps_as_alone(Device::Cuda(0));
        }
    }

    /// Env counts whose sum, or whose product with the assets or observation floats, passes `i32::MAX`
    /// are refused before anything is joined (the tensors stay small: only the counts are faked).
    #[test]
    fn a_population_too_large_for_the_kernels_i32_indexing_is_refused() {
        let panel = panel_with_turbulence();
        let cfg = EnvConfig { n_envs: 2, episode_len: 12, ..Default::default() };
        let with_envs = |n: i32| {
            let mut env = TensorKernelEnv::new(&cfg, &panel, Device::Cpu).unwrap();
            (env.params.n_envs, env.params.trial_envs) = (n, n);
            env
        };
        for n in [1 << 30, 1 << 28] {
            let err = TensorKernelEnv::stack(vec![with_envs(n), with_envs(n)]).err().map(|e| e.to_string());
            let err = err.unwrap_or_default();
            assert!(err.contains("the population's") && err.contains("32-bit"), "{n}: {err}");
        }
    }

    #[test]
    fn trials_that_differ_in_what_a_search_does_not_tune_are_refused() {
        let panel = panel_with_turbulence();
        let a = EnvConfig { n_envs: 4, episode_len: 12, ..Default::default() };
        let b = EnvConfig { n_envs: 4, episode_len: 13, ..Default::default() };
        let c = EnvConfig { n_envs: 3, episode_len: 12, ..Default::default() };
        let new = |c: &EnvConfig| TensorKernelEnv::new(c, &panel, Device::Cpu).unwrap();
        assert!(TensorKernelEnv::stack(vec![new(&a), new(&b)]).is_err());
        assert!(TensorKernelEnv::stack(vec![new(&a), new(&c)]).is_err());
        let mut two = TensorKernelEnv::stack(vec![new(&a), new(&a)]).unwrap();
        assert!(two.keep(&[]).is_err() && two.keep(&[1, 0]).is_err() && two.keep(&[2]).is_err());
        assert!(two.keep(&[1]).is_ok());
    }
}
