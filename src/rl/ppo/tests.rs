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
/// happens in a process of its own, free of other tests' draws.
#[test]
fn determinism_child() {
    let Ok(seed) = std::env::var("TRADEBOT_PPO_DETERMINISM_SEED") else { return };
    let seed: u64 = seed.parse().unwrap();
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
            .args(["--exact", "rl::ppo::tests::determinism_child", "--nocapture", "--test-threads=1"])
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
    let t2 = |m: [[f32; 2]; 3]| Tensor::from_slice(m.as_flattened()).view([3, 2]);
    let ro = Rollout {
        obs: Tensor::zeros([3, 2, 4], (Kind::Float, Device::Cpu)),
        actions: Tensor::zeros([3, 2, 1], (Kind::Float, Device::Cpu)),
        log_probs: Tensor::zeros([3, 2], (Kind::Float, Device::Cpu)),
        values: t2(v),
        rewards: t2(r),
        dones: t2(d),
        last_value: Tensor::from_slice(&last),
    };
    let got = Vec::<f32>::try_from(p.advantages(&ro).reshape([-1])).unwrap();
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
    let rt = crate::native::init_onnxruntime(None).unwrap();
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
