//! The GPU checks that belong to no single module: the LSTM epoch on CUDA, the ONNX export of a
//! CUDA-trained policy under ONNX Runtime on the CPU, NVML during a training run, and bfloat16 autocast
//! against float32. The other GPU tests sit beside the code they check, each in a `gpu_tests` module
//! (the env kernel's CUDA build against the CPU build, GAE, PPO's reads per update, the population's env
//! and trainer). All of them compile only with the feature `gpu-tests` (`make test-gpu` runs exactly
//! them, by the `gpu_tests::` filter); each fails, never skips, where no CUDA device is usable.

use crate::env::EnvConfig;
use crate::lstm::dataset::{WindowDataset, chronological_split, synthetic};
use crate::lstm::train::LstmTrainer;
use crate::rl::BatchEnv;
use crate::rl::ppo::{Ppo, PpoConfig};
use crate::rl::trading::KernelTradingEnv;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

/// The first CUDA device; a failure, not a skip, where there is none.
fn cuda() -> Device {
    assert!(
        crate::runtime_libs::load_torch_cuda(),
        "no CUDA device (tch::Cuda::is_available() is false: no NVIDIA driver, or no GPU): this test needs a GPU"
    );
    Device::Cuda(0)
}

/// PPO on the env kernel's CUDA build (1,024 envs, 32 steps an update), trained while `go_on` says so.
fn train_on_cuda(hidden: Vec<i64>, mut go_on: impl FnMut(u64) -> bool) -> (Ppo, usize) {
    let cuda = cuda();
    let panel = crate::env::tests::real_panel();
    let cfg = EnvConfig { n_envs: 1024, episode_len: 20, seed: 5, ..Default::default() };
    let mut env = KernelTradingEnv::new(&cfg, &panel, cuda).unwrap();
    assert_eq!(env.device(), cuda, "the env kernel is not on the GPU");
    let ppo_cfg = PpoConfig { hidden, n_steps: 32, batch_size: 8192, n_epochs: 2, seed: 7, ..Default::default() };
    let mut ppo = Ppo::new(ppo_cfg, env.obs_dim(), env.act_dim(), cuda).unwrap();
    ppo.train(&mut env, 1_000 * 32 * 1024, |s| go_on(s.update)).unwrap();
    (ppo, env.obs_dim())
}

/// A policy trained on the GPU, exported by our ONNX writer, gives under ONNX Runtime on the CPU what
/// tch gives on the GPU, within 1e-5 (the daemon serves what the trainer learnt).
#[test]
fn onnx_export_of_a_cuda_trained_policy_equals_its_tch_outputs_on_the_cpu() {
    let (ppo, obs_dim) = train_on_cuda(vec![64, 64], |update| update < 3);
    assert_eq!((ppo.device(), ppo.updates), (Device::Cuda(0), 3));
    let bytes = ppo.export_policy(Some(1.0)).unwrap().to_onnx("obs", "action", &[]).unwrap();
    let rt = crate::runtime_libs::init_onnxruntime(None).unwrap_or_else(|e| panic!("{e}"));
    let mut s = ort::session::Session::builder(&rt.env).unwrap().commit_from_memory(&bytes).unwrap();
    let n = 1000;
    let obs = Tensor::randn([n, obs_dim as i64], (Kind::Float, Device::Cpu)) * 2.0;
    let on_gpu = ppo.act_deterministic(&obs.to_device(Device::Cuda(0))).clamp(-1.0, 1.0);
    let want = Vec::<f32>::try_from(on_gpu.to_device(Device::Cpu).reshape([-1])).unwrap();
    let x = ndarray::Array2::from_shape_vec((n as usize, obs_dim), Vec::<f32>::try_from(obs.reshape([-1])).unwrap())
        .unwrap();
    let out = s.run(ort::inputs!["obs" => ort::value::TensorRef::from_array_view(x.view()).unwrap()]).unwrap();
    let got = out["action"].try_extract_array::<f32>().unwrap();
    assert_eq!(got.len(), want.len(), "ONNX Runtime's output has another shape");
    let max_diff = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    assert!(max_diff <= 1e-5, "tch on CUDA and ONNX Runtime on the CPU differ by {max_diff}");
    assert!(want.iter().any(|w| w.abs() > 1e-3), "the policy's output is all ~0: the comparison proves little");
}

/// NVML reads the GPU busy while PPO trains on it (two seconds of updates at least, so that NVML's
/// sample period is covered), and sees its memory in use.
#[test]
fn nvml_sees_the_gpu_busy_during_a_training_run() {
    cuda();
    let sampler =
        crate::ml::gpu::GpuSampler::start(0, Duration::from_millis(20)).unwrap_or_else(|e| panic!("NVML: {e}"));
    let started = Instant::now();
    let (ppo, _) = train_on_cuda(vec![256, 256], |_| started.elapsed() < Duration::from_secs(2));
    let stats = sampler.stop();
    assert!(ppo.updates >= 1);
    assert!(stats.samples >= 10, "NVML sampled {} times in {:?}", stats.samples, started.elapsed());
    assert!(stats.busy_mean_pct > 0.0, "NVML saw the GPU idle during training: {stats:?}");
    assert!(stats.memory_max_mb > 0.0, "NVML saw no GPU memory in use: {stats:?}");
}

/// bfloat16 autocast, as `mixed_precision` trains the large preset ([2048, 1024, 512]), against float32 on
/// the same weights and observations: the policy mean and the value within 2% relative L2 error (bfloat16
/// keeps 8 significant bits, ~0.4% a rounding; the matrix products accumulate in float32), and not equal
/// (autocast did run).
#[test]
fn bfloat16_autocast_is_within_two_percent_of_float32() {
    const TOLERANCE: f64 = 2e-2;
    let cuda = cuda();
    let cfg = PpoConfig { hidden: vec![2048, 1024, 512], mixed_precision: true, seed: 3, ..Default::default() };
    let ppo = Ppo::new(cfg, 64, 30, cuda).unwrap();
    crate::ml::autocast::set_cuda_dtype(Kind::BFloat16).unwrap();
    assert_eq!(crate::ml::autocast::cuda_dtype().unwrap(), Kind::BFloat16);
    let obs = Tensor::randn([4096, 64], (Kind::Float, cuda));
    let m = &ppo.model;
    let (mean32, value32) = tch::no_grad(|| (m.mean(&obs), m.value(&obs)));
    let (mean16, value16) = tch::no_grad(|| tch::autocast(true, || (m.mean(&obs), m.value(&obs))));
    assert_eq!((mean32.kind(), mean16.kind()), (Kind::Float, Kind::BFloat16), "autocast did not run in bfloat16");
    for (what, exact, amp) in [("policy mean", &mean32, &mean16), ("value", &value32, &value16)] {
        let err = (amp.to_kind(Kind::Float) - exact).norm().double_value(&[]) / exact.norm().double_value(&[]);
        assert!(err.is_finite() && err <= TOLERANCE, "{what}: bfloat16 is {err:.4} (relative L2) from float32");
        assert!(err > 0.0, "{what}: bfloat16 equals float32: autocast changed nothing");
    }
}

/// The LSTM's epoch on CUDA (data resident on the device, windows gathered by index) learns the planted
/// pattern as on the CPU, and reads from the device twice an epoch whatever its batch count.
#[test]
fn the_lstm_epoch_on_cuda_learns_the_planted_pattern_reading_twice_an_epoch() {
    let cuda = cuda();
    let ds = WindowDataset::new(synthetic(20_000, 16, 4, 4, 3, 1), cuda).unwrap();
    assert_eq!(ds.device(), cuda);
    let (tr, va, te) = chronological_split(ds.len() as usize, 0.6, 0.2, 5);
    let mut t = LstmTrainer::new(crate::lstm::tests::cfg(), crate::lstm::tests::dims(), cuda).unwrap();
    let before = crate::ml::readback::reads();
    let hist = t.fit(&ds, &tr, &va, None, |s| s.best_mcc < 0.7).unwrap();
    assert_eq!(crate::ml::readback::reads() - before, 2 * hist.len() as u64, "reads over {} epochs", hist.len());
    assert!(tr.len() / 256 > 40, "too few batches an epoch for the read count to mean anything");
    let (_, conf) = t.evaluate(&ds, &te, None).unwrap();
    assert!(conf.mcc() >= 0.5, "test MCC {} after {} epochs on CUDA", conf.mcc(), hist.len());
    assert!(hist.iter().all(|h| h.train_loss.is_finite()), "{hist:?}");
}
