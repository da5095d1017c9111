use super::*;
use crate::rl::cartpole::CartPole;

fn small() -> PpoConfig {
    PpoConfig { hidden: vec![32, 32], n_steps: 32, batch_size: 64, n_epochs: 2, seed: 11, ..Default::default() }
}

/// A hash of every parameter's bits.
fn params_hash(p: &Ppo) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut vars: Vec<_> = p.vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (k, t) in vars {
        k.hash(&mut h);
        for x in Vec::<f32>::try_from(t.reshape([-1])).unwrap() {
            x.to_bits().hash(&mut h);
        }
    }
    h.finish()
}

/// Child half of `same_seed_same_result_on_cpu`: torch's RNG is global to the process, so each run
/// happens in a process of its own, free of other tests' draws. Ignored: it runs only when that test
/// launches it by name, so it can never pass by doing nothing.
#[test]
#[ignore = "child process of rl::ppo::tests::same_seed_same_result_on_cpu, launched by it"]
fn determinism_child() {
    let seed = std::env::var("TRADEBOT_PPO_DETERMINISM_SEED")
        .expect("run by same_seed_same_result_on_cpu, which sets TRADEBOT_PPO_DETERMINISM_SEED");
    let seed: u64 = seed.parse().expect("TRADEBOT_PPO_DETERMINISM_SEED is a number");
    tch::set_num_threads(1);
    let mut p = Ppo::new(PpoConfig { seed, ..small() }, 4, 1, Device::Cpu).unwrap();
    let mut env = CartPole::new(4, seed);
    p.train(&mut env, 3 * 32 * 4, |_| true).unwrap();
    println!("PARAMS_HASH={:x}", params_hash(&p));
}

#[test]
fn same_seed_same_result_on_cpu() {
    let run = |seed: u64| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "rl::ppo::tests::determinism_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env("TRADEBOT_PPO_DETERMINISM_SEED", seed.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split("PARAMS_HASH=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no hash in {text}"))
    };
    let (a, b, c) = (run(5), run(5), run(6));
    assert_eq!(a, b, "two runs with one seed differ");
    assert_ne!(a, c, "different seeds gave identical parameters");
}

#[test]
fn gae_matches_a_hand_computation() {
    let p = Ppo::new(PpoConfig { gamma: 0.9, gae_lambda: 0.8, ..small() }, 4, 1, Device::Cpu).unwrap();
    // T = 3, E = 2; env 1 ends at t = 1.
    let r = [[1.0f32, 0.5], [0.0, 2.0], [1.0, 1.0]];
    let v = [[0.2f32, 0.1], [0.3, -0.4], [0.5, 0.6]];
    let d = [[0.0f32, 0.0], [0.0, 1.0], [0.0, 0.0]];
    let last = [0.7f32, 0.8];
    // The single run's rollout: one trial, `[T, 1, E]`.
    let t2 = |m: [[f32; 2]; 3]| Tensor::from_slice(m.as_flattened()).view([3, 1, 2]);
    let ro = population::Rollout {
        obs: Tensor::zeros([3, 1, 2, 4], (Kind::Float, Device::Cpu)),
        actions: Tensor::zeros([3, 1, 2, 1], (Kind::Float, Device::Cpu)),
        log_probs: Tensor::zeros([3, 1, 2], (Kind::Float, Device::Cpu)),
        values: t2(v),
        rewards: t2(r),
        dones: t2(d),
        last_value: Tensor::from_slice(&last).view([1, 2]),
    };
    let pop = Population::single(&p).unwrap();
    let got = Vec::<f32>::try_from(pop.advantages(&ro).unwrap().reshape([-1])).unwrap();
    let mut want = [[0.0f64; 2]; 3];
    for e in 0..2 {
        let mut acc = 0.0f64;
        for t in (0..3).rev() {
            let nd = 1.0 - d[t][e] as f64;
            let next_v = if t == 2 { last[e] as f64 } else { v[t + 1][e] as f64 };
            let delta = r[t][e] as f64 + 0.9 * next_v * nd - v[t][e] as f64;
            acc = delta + 0.9 * 0.8 * nd * acc;
            want[t][e] = acc;
        }
    }
    for (g, w) in got.iter().zip(want.as_flattened()) {
        assert!((*g as f64 - w).abs() < 1e-5, "{got:?} vs {want:?}");
    }
}

#[test]
fn exported_policy_matches_tch_through_onnx_runtime() {
    let mut p = Ppo::new(small(), 4, 1, Device::Cpu).unwrap();
    let mut env = CartPole::new(4, 3);
    p.train(&mut env, 4 * 32 * 4, |_| true).unwrap();
    let policy = p.export_policy(Some(1.0)).unwrap();
    let bytes = policy.to_onnx("obs", "action", &[]).unwrap();
    let rt = crate::runtime_libs::init_onnxruntime(None).unwrap();
    let mut s = ort::session::Session::builder(&rt.env).unwrap().commit_from_memory(&bytes).unwrap();
    let obs = Tensor::randn([1000, 4], (Kind::Float, Device::Cpu)) * 2.0;
    let want = Vec::<f32>::try_from(p.act_deterministic(&obs).clamp(-1.0, 1.0).reshape([-1])).unwrap();
    let flat = Vec::<f32>::try_from(obs.reshape([-1])).unwrap();
    let x = ndarray::Array2::from_shape_vec((1000, 4), flat).unwrap();
    let out = s.run(ort::inputs!["obs" => ort::value::TensorRef::from_array_view(x.view()).unwrap()]).unwrap();
    let got = out["action"].try_extract_array::<f32>().unwrap();
    let max_diff = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    assert!(max_diff <= 1e-5, "tch and ort differ by {max_diff}");
    assert!(want.iter().any(|w| w.abs() > 1e-3), "policy output is all ~0: weak test");
}

#[test]
fn refuses_mismatched_env_and_bad_config() {
    let mut p = Ppo::new(small(), 5, 1, Device::Cpu).unwrap();
    let err = p.train(&mut CartPole::new(2, 0), 100, |_| true).unwrap_err();
    assert!(matches!(err, PpoError::Shape { what: "observations", env: 4, policy: 5 }), "{err}");
    let err = Ppo::new(PpoConfig { gamma: 1.5, ..small() }, 4, 1, Device::Cpu).err().unwrap();
    assert!(err.to_string().contains("ppo.gamma"), "{err}");
}

/// Every parameter and Adam moment of the trainer, flat, from its `VarStore`.
fn flat_state(p: &Ppo) -> Vec<f32> {
    let mut out = Vec::new();
    for t in p.model.parameters().iter().chain([&p.adam.flat_m, &p.adam.flat_v]) {
        out.extend(Vec::<f32>::try_from(t.to_device(Device::Cpu).reshape([-1])).unwrap());
    }
    out
}

#[test]
fn native_and_libtorch_take_the_same_minibatch_steps() {
    assert_libtorch_steps_as_native(Device::Cpu);
}

/// The libtorch trainer (a population of one) on `device` and the native trainer on the CPU take the same
/// minibatch steps from the same weights: the loss, the clipping (gradient norm, value clip) and Adam.
/// CUDA's matmuls sum in another order: there the first step's statistics are compared (the same
/// weights), and the weights after three steps must mostly agree (Adam turns a sign flip of a near-zero
/// gradient into a whole step).
fn assert_libtorch_steps_as_native(device: Device) {
    // Small enough to check by hand, with every branch in play: the value clip, the entropy bonus, the
    // gradient-norm clip (a low max norm), and one log-std held outside its bounds (no gradient).
    let cfg = PpoConfig {
        hidden: vec![16, 8],
        ent_coef: 0.01,
        max_grad_norm: 0.3,
        clip_range_vf: Some(0.2),
        log_std_max: 1.0,
        seed: 21,
        ..small()
    };
    let cpu = Device::Cpu;
    let mut nat = Ppo::new(PpoConfig { cpu_backend: CpuBackend::Native, ..cfg.clone() }, 5, 3, cpu).unwrap();
    let mut lt = Ppo::new(PpoConfig { cpu_backend: CpuBackend::Libtorch, ..cfg.clone() }, 5, 3, device).unwrap();
    assert_eq!((nat.backend(), lt.backend()), ("native", "libtorch"));
    tch::no_grad(|| {
        lt.model.log_std.shallow_clone().copy_(&Tensor::from_slice(&[-0.5f32, 1.5, 0.2]).to_device(device));
    });
    // Both start from the same weights. That one seed gives the same weights is checked in processes of
    // their own (`same_seed_same_result_on_cpu`): torch's generator is global, and a test drawing from it
    // on another thread while these two are built changes one of them.
    tch::no_grad(|| {
        for (to, from) in nat.model.parameters().iter().zip(lt.model.parameters()) {
            to.shallow_clone().copy_(&from.to_device(cpu));
        }
    });
    nat.pull_native().unwrap();
    assert_eq!(flat_state(&nat), flat_state(&lt), "both backends start from the same weights and moments");
    let mut pop = Population::single(&lt).unwrap();
    tch::manual_seed(77);
    let lr = 3e-3;
    let cuda = device.is_cuda();
    let mut clipped_seen = 0.0;
    let steps = if cuda { 3 } else { 8 };
    for step in 0..steps {
        let n = 48;
        let obs = Tensor::randn([n, 5], (Kind::Float, cpu));
        let actions = Tensor::randn([n, 3], (Kind::Float, cpu));
        // Old log-probs and values away from the current ones, so that ratios and values get clipped.
        let lp = tch::no_grad(|| nat.model.log_prob(&nat.model.mean(&obs), &actions));
        let old_lp = &lp + Tensor::randn([n], (Kind::Float, cpu)) * 0.4;
        let old_v = tch::no_grad(|| nat.model.value(&obs)) + Tensor::randn([n], (Kind::Float, cpu)) * 0.3;
        let adv = Tensor::randn([n], (Kind::Float, cpu)) * 2.0 + 0.3;
        let ret = Tensor::randn([n], (Kind::Float, cpu));
        let batch = [obs, actions, old_lp, old_v, adv, ret];
        let host: Vec<Vec<f32>> = batch.iter().map(|t| Vec::<f32>::try_from(t.reshape([-1])).unwrap()).collect();
        let b = native::Batch {
            obs: &host[0],
            actions: &host[1],
            old_log_prob: &host[2],
            old_value: &host[3],
            advantage: &host[4],
            returns: &host[5],
        };
        let on_device = batch.each_ref().map(|t| t.to_device(device).unsqueeze(0));
        let stats = pop.minibatch(&on_device, &Tensor::from_slice(&[lr]).to_device(device));
        let [loss, pl, vl, kl, cf] =
            <[f64; 5]>::try_from(Vec::<f64>::try_from(stats.to_device(cpu).reshape([-1])).unwrap()).unwrap();
        let (cfg_n, mut adam_steps) = (nat.cfg.clone(), nat.adam.steps);
        let got = nat.native.as_mut().unwrap().minibatch(&cfg_n, lr, &mut adam_steps, &b, 0).unwrap();
        nat.adam.steps = adam_steps;
        nat.push_native();
        let tolerance = if cuda { 1e-4 } else { 1e-5 };
        for (what, g, w) in [
            ("loss", got.loss, loss),
            ("policy loss", got.policy_loss, pl),
            ("value loss", got.value_loss, vl),
            ("approx kl", got.approx_kl, kl),
            ("clip fraction", got.clip_fraction, cf),
        ] {
            let compared = !cuda || step == 0;
            assert!(
                !compared || (g - w).abs() <= tolerance * (1.0 + w.abs()),
                "step {step}: {what} native {g} libtorch {w}"
            );
        }
        clipped_seen += cf;
    }
    assert!(clipped_seen > 0.0, "no ratio was ever clipped: a weak test");
    pop.write_back(0, &mut lt).unwrap();
    let (a, b) = (flat_state(&nat), flat_state(&lt));
    let close = |x: &f32, y: &f32| (x - y).abs() / (1.0 + y.abs()) <= if cuda { 1e-4 } else { 1e-5 };
    let agree = a.iter().zip(&b).filter(|(x, y)| close(x, y)).count() as f64 / a.len() as f64;
    let want = if cuda { 0.99 } else { 1.0 };
    assert!(agree >= want, "only {agree} of the parameters and Adam moments agree after {steps} steps");
    assert_eq!((nat.adam.steps, lt.adam.steps), (steps, steps));
    // The log-std held above its bound got no gradient, on either side.
    let ls = Vec::<f32>::try_from(lt.model.log_std.to_device(cpu)).unwrap();
    assert_eq!(ls[1], 1.5, "{ls:?}");
    assert_ne!(ls[0], -0.5, "{ls:?}");
    // And the update moved the weights: the comparison is not between two untouched copies.
    let fresh = Ppo::new(PpoConfig { cpu_backend: CpuBackend::Libtorch, ..cfg }, 5, 3, device).unwrap();
    assert!(flat_state(&fresh).iter().zip(&b).any(|(x, y)| (x - y).abs() > 1e-4));
}

/// `ppo.target_kl` ends a libtorch run's epochs early (a population of one may; several trials in step may
/// not): with a tiny target every update stops after its first epoch, and without one it runs them all.
#[test]
fn a_libtorch_run_stops_its_epochs_at_the_target_kl() {
    for (target, epochs) in [(Some(1e-12), 1), (None, 2)] {
        let cfg = PpoConfig { cpu_backend: CpuBackend::Libtorch, target_kl: target, ..small() };
        let mut p = Ppo::new(cfg, 4, 1, Device::Cpu).unwrap();
        let mut seen = Vec::new();
        p.train(&mut CartPole::new(4, 1), 2 * 32 * 4, |s| {
            seen.push(s.epochs_run);
            true
        })
        .unwrap();
        assert_eq!(seen, [epochs, epochs], "target {target:?}");
        assert_eq!(p.adam.steps, 2 * epochs as u64 * 2, "2 updates of {epochs} epochs of 2 minibatches");
    }
}

#[test]
fn a_checkpoint_carries_adams_moments_across_backends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ppo.safetensors");
    let mut p = Ppo::new(small(), 4, 1, Device::Cpu).unwrap();
    p.train(&mut CartPole::new(4, 1), 2 * 32 * 4, |_| true).unwrap();
    assert_eq!(p.adam.steps, 2 * 2 * 2, "2 updates of 2 epochs of 2 minibatches");
    p.save_weights(&path).unwrap();
    let saved = flat_state(&p);
    assert!(p.adam.flat_v.abs().sum(Kind::Float).double_value(&[]) > 0.0);
    for backend in [CpuBackend::Native, CpuBackend::Libtorch] {
        let mut q = Ppo::new(PpoConfig { cpu_backend: backend, seed: 99, ..small() }, 4, 1, Device::Cpu).unwrap();
        assert_ne!(flat_state(&q), saved);
        q.load_weights(&path).unwrap();
        assert_eq!(flat_state(&q), saved, "{backend:?}");
        assert_eq!(q.adam.steps, 8, "{backend:?}");
        if let Some(n) = &q.native {
            assert_eq!(n.adam_v, Vec::<f32>::try_from(&p.adam.flat_v).unwrap());
        }
    }
    // A checkpoint for another network is refused by name.
    let mut other = Ppo::new(PpoConfig { hidden: vec![8], ..small() }, 4, 1, Device::Cpu).unwrap();
    let err = other.load_weights(&path).unwrap_err().to_string();
    assert!(err.contains("checkpoint") || err.contains("shape"), "{err}");
}

/// The libtorch trainer on the env kernel's tensors (on the CPU here; on a GPU the same code on CUDA).
fn kernel_setup() -> (crate::rl::trading::KernelTradingEnv, Ppo) {
    let panel = crate::env::tests::real_panel();
    let cfg = crate::env::EnvConfig { n_envs: 8, episode_len: 20, seed: 3, ..Default::default() };
    let env = crate::rl::trading::KernelTradingEnv::new(&cfg, &panel, Device::Cpu).unwrap();
    let ppo_cfg = PpoConfig { cpu_backend: CpuBackend::Libtorch, n_steps: 16, batch_size: 64, ..small() };
    let ppo = Ppo::new(ppo_cfg, env.obs_dim(), env.act_dim(), Device::Cpu).unwrap();
    (env, ppo)
}

/// On the device path a rollout step reads nothing back to the host (on a GPU each read is a
/// synchronisation), and an update reads twice: its statistics and the episode returns summed on the device.
#[test]
fn a_rollout_on_the_kernel_env_reads_nothing_back_and_an_update_reads_twice() {
    use crate::ml::readback::reads;
    let (mut env, ppo) = kernel_setup();
    let mut pop = Population::single(&ppo).unwrap();
    let (mut recent, mut episodes) = (std::collections::VecDeque::new(), 0);
    let mut one = OneEnv { env: &mut env, device: Device::Cpu, recent: &mut recent, episodes: &mut episodes };
    let updates = Tensor::from_slice(&[0i64]);
    let before = reads();
    let rollout = pop.collect(&mut one, 8, &updates).unwrap();
    assert_eq!(reads() - before, 0, "16 rollout steps read from the device");
    assert_eq!(rollout.rewards.size(), [16, 1, 8]);
    let before = reads();
    pop.update(&rollout, &[3e-4], &updates, &Tensor::from_slice(&[3e-4f64])).unwrap();
    assert_eq!(reads() - before, 1, "an update reads its statistics once, not per minibatch");

    let (mut env, mut ppo) = kernel_setup();
    let (before, mut seen) = (reads(), Vec::new());
    ppo.train(&mut env, 3 * 16 * 8, |s| {
        seen.push((s.episodes, s.mean_return));
        true
    })
    .unwrap();
    assert_eq!(reads() - before, 3 * 2, "3 updates, each reading its statistics and the episode returns");
    // Episodes of 20 steps, 16 steps an update: none ends in the first update, all 8 in the second and third.
    assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), vec![0, 8, 16]);
    assert!(seen[0].1.is_none() && seen[1].1.is_some() && seen[2].1.is_some(), "{seen:?}");
}

/// Child half of `the_kernel_env_on_the_device_trains_the_weights_vecenv_trains`: torch's RNG is global
/// to the process, so each run happens in a process of its own. Ignored: it runs only when that test
/// launches it by name, so it can never pass by doing nothing.
#[test]
#[ignore = "child process of rl::ppo::tests::the_kernel_env_on_the_device_trains_the_weights_vecenv_trains"]
fn kernel_env_training_child() {
    let which = std::env::var("TRADEBOT_PPO_ENV")
        .expect("run by the_kernel_env_on_the_device_trains_the_weights_vecenv_trains, which sets TRADEBOT_PPO_ENV");
    tch::set_num_threads(1);
    let (mut kernel, mut ppo) = kernel_setup();
    let steps = 3 * 16 * 8;
    if which == "kernel" {
        ppo.train(&mut kernel, steps, |_| true).unwrap();
    } else {
        let panel = crate::env::tests::real_panel();
        let cfg = crate::env::EnvConfig { n_envs: 8, episode_len: 20, seed: 3, ..Default::default() };
        let mut host = crate::rl::trading::TradingEnv::new(cfg, panel).unwrap();
        ppo.train(&mut host, steps, |_| true).unwrap();
    }
    println!("PARAMS_HASH={:x} EPISODES={}", params_hash(&ppo), ppo.episodes);
}

/// The env kernel (its state in tensors, returns summed on the device) and `VecEnv` on the host give the
/// libtorch trainer the same transitions: the trained weights agree bit for bit, and so do the episodes.
#[test]
fn the_kernel_env_on_the_device_trains_the_weights_vecenv_trains() {
    let run = |which: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "rl::ppo::tests::kernel_env_training_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TRADEBOT_PPO_ENV", which)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split("PARAMS_HASH=")
            .nth(1)
            .map(|r| r.lines().next().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("no hash from the {which} child: {text}{}", String::from_utf8_lossy(&out.stderr)))
    };
    let (kernel, host) = (run("kernel"), run("host"));
    assert_eq!(kernel, host, "kernel env vs VecEnv");
    assert!(kernel.ends_with("EPISODES=16"), "{kernel}");
}

/// The native trainer on the trading env trains the same weights, bit for bit, on 1, 2 or 3 threads: the
/// env's chunks and the GEMM blocks (128 envs, minibatches of 256 rows) depend on the shapes, not on the
/// pool.
#[test]
fn the_native_trainer_gives_the_same_bits_on_any_thread_count() {
    let cfg = PpoConfig { n_steps: 4, batch_size: 256, n_epochs: 2, cpu_backend: CpuBackend::Native, ..small() };
    let panel = crate::env::tests::real_panel();
    let env_cfg = crate::env::EnvConfig { n_envs: 128, episode_len: 30, seed: 4, ..Default::default() };
    let env = || crate::rl::trading::TradingEnv::new(env_cfg.clone(), panel.clone()).unwrap();
    let (obs, act) = (env().obs_dim(), env().act_dim());
    // One set of initial weights for every run (torch's generator is shared with other tests).
    let dir = tempfile::tempdir().unwrap();
    let start = dir.path().join("start.safetensors");
    Ppo::new(cfg.clone(), obs, act, Device::Cpu).unwrap().save_weights(&start).unwrap();
    let mut seen = Vec::new();
    for threads in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let state = pool.install(|| {
            let mut p = Ppo::new(cfg.clone(), obs, act, Device::Cpu).unwrap();
            p.load_weights(&start).unwrap();
            p.train(&mut env(), 2 * 4 * 128, |_| true).unwrap();
            flat_state(&p)
        });
        seen.push(state.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }
    let mut untrained = Ppo::new(cfg, obs, act, Device::Cpu).unwrap();
    untrained.load_weights(&start).unwrap();
    let before: Vec<u32> = flat_state(&untrained).iter().map(|x| x.to_bits()).collect();
    assert_ne!(seen[0], before, "training did not move the weights: the comparison proves nothing");
    assert_eq!(seen[0], seen[1], "1 thread vs 2");
    assert_eq!(seen[0], seen[2], "1 thread vs 3");
}

/// Needs a CUDA GPU (feature `gpu-tests`, `make test-gpu`): fails without one.
#[cfg(feature = "gpu-tests")]
mod gpu_tests {
    use super::*;

    /// On CUDA the trainer steps the env kernel on the device and reads twice an update, whatever the rollout
    /// length (each read a synchronisation). Needs a GPU: `make test-gpu`.
    #[test]
    fn on_cuda_an_update_reads_the_device_twice() {
        assert!(crate::runtime_libs::load_torch_cuda(), "no CUDA device: this test needs a GPU");
        let cuda = Device::Cuda(0);
        let panel = crate::env::tests::real_panel();
        let cfg = crate::env::EnvConfig { n_envs: 1024, episode_len: 20, seed: 3, ..Default::default() };
        let mut env = crate::rl::trading::KernelTradingEnv::new(&cfg, &panel, cuda).unwrap();
        assert_eq!(env.device(), cuda);
        let ppo_cfg = PpoConfig { n_steps: 32, batch_size: 8192, n_epochs: 2, mixed_precision: true, ..small() };
        let mut ppo = Ppo::new(ppo_cfg, env.obs_dim(), env.act_dim(), cuda).unwrap();
        assert_eq!(ppo.backend(), "libtorch");
        let before = crate::ml::readback::reads();
        let mut seen = Vec::new();
        ppo.train(&mut env, 3 * 32 * 1024, |s| {
            seen.push(s.clone());
            true
        })
        .unwrap();
        assert_eq!(crate::ml::readback::reads() - before, 3 * 2);
        assert!(seen.iter().all(|s| s.policy_loss.is_finite() && s.value_loss.is_finite()), "{seen:?}");
        assert_eq!(seen[2].episodes, 1024 * 4, "episodes of 20 steps over 96 steps");
        assert_eq!(crate::ml::autocast::cuda_dtype().unwrap(), Kind::BFloat16, "mixed precision runs in bfloat16");
    }

    /// On CUDA the libtorch trainer's minibatch step is the native trainer's (within CUDA's summation
    /// order). Needs a GPU: `make test-gpu`.
    #[test]
    fn on_cuda_a_libtorch_step_is_the_native_step() {
        assert!(crate::runtime_libs::load_torch_cuda(), "no CUDA device: this test needs a GPU");
        assert_libtorch_steps_as_native(Device::Cuda(0));
    }
}
