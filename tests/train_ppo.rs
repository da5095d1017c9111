//! `tradebot train ppo` end to end on the shipped data (a small network and a short run): JSON lines that
//! end with `done`, a registered candidate whose manifest fits the config's pipeline, an ONNX file that
//! ONNX Runtime runs with actions in [-1, 1], checkpoints and `--resume`, `--warm-start` from a registered
//! model (or from scratch with the reason), SAC's too, and clear errors for bad input.
#![cfg(feature = "train")]

mod common;

use common::{demo_config, text, tradebot, write_config};
use std::path::{Path, PathBuf};
use std::process::Output;
use tradebot::Config;
use tradebot::FEATURE_VERSION;
use tradebot::models::{FeatureRef, ModelKind, ModelState, Registry, TensorSpec};

/// The demo config with its state under `dir`, a small network, 4 envs, two years of training data, and
/// `replace` applied on top.
fn small_config(dir: &Path, replace: &[(&str, &str)]) -> PathBuf {
    let mut s = demo_config(dir);
    let edits = [
        ("[env]\n", "[env]\nn_envs = 4\nepisode_len = 40\n"),
        ("[ppo]\n", "[ppo]\nhidden = [16, 16]\nn_steps = 16\nbatch_size = 32\nn_epochs = 2\n"),
        (
            "window_days = 3650\nholdout_days = 365",
            "from = \"2005-01-01\"\nto = \"2006-12-31\"\nholdout_from = \"2011-01-01\"\nholdout_to = \"2013-03-01\"",
        ),
        ("checkpoint_every = 10", "checkpoint_every = 2"),
    ];
    for (a, b) in edits.iter().chain(replace) {
        assert!(s.contains(a), "the demo config lost {a:?}");
        s = s.replacen(a, b, 1);
    }
    write_config(dir, &s)
}

fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

#[test]
fn train_registers_a_model_that_fits_the_pipeline_and_resume_continues() {
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = small_config(dir.path(), &[]);
    let cfg = cfg_path.to_str().unwrap();
    let o = tradebot(&["train", "ppo", "--config", cfg, "--device", "cpu", "--steps", "256", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = json_lines(&o);
    let (done, progress) = lines.split_last().expect("some output");
    assert_eq!(done["event"], "done", "{lines:?}");
    assert_eq!(progress.len(), 4, "256 steps of 4 envs x 16 = 4 updates: {lines:?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["event"], "progress");
        assert_eq!(p["update"], i as u64 + 1);
        assert!(p["approx_kl"].is_f64() && p["explained_variance"].is_f64() && p["steps_per_sec"].is_f64(), "{p}");
    }
    let id = done["model_id"].as_str().unwrap();
    assert!(done["metrics"]["onnx_max_abs_diff"].as_f64().unwrap() <= 1e-5, "{done}");

    let config = Config::load(&cfg_path).unwrap();
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let (m, bytes) = reg.load(id).unwrap();
    assert_eq!((m.kind, m.state), (ModelKind::Ppo, ModelState::Candidate));
    let (a, f) = (config.market.symbols.len() as i64, config.features.n_cols() as i64);
    let obs_dim = 1 + a * (1 + f);
    let pipeline = FeatureRef { version: FEATURE_VERSION, names: config.features.names() };
    let inputs = [TensorSpec { name: "obs".into(), shape: vec![-1, obs_dim] }];
    m.check_inputs(&pipeline, &inputs, &config.market.symbols, config.market.timeframe).unwrap();
    assert_eq!(m.outputs, [TensorSpec { name: "action".into(), shape: vec![-1, a] }]);
    assert_eq!(m.params["env"]["initial_cash"], 100_000.0);
    assert_eq!(m.params["env"]["exec"]["max_trade"], 100.0);
    assert_eq!(m.holdout_from, config.train.holdout_from);

    // ONNX Runtime runs it; actions stay in [-1, 1] even for wild observations.
    let rt = tradebot::init_onnxruntime(None).unwrap();
    let mut s = ort::session::Session::builder(&rt.env).unwrap().commit_from_memory(&bytes).unwrap();
    let n = 64usize;
    let obs: Vec<f32> = (0..n * obs_dim as usize).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 5.0).collect();
    let x = ndarray::Array2::from_shape_vec((n, obs_dim as usize), obs).unwrap();
    let out = s.run(ort::inputs!["obs" => ort::value::TensorRef::from_array_view(x.view()).unwrap()]).unwrap();
    let acts = out["action"].try_extract_array::<f32>().unwrap();
    assert_eq!(acts.shape(), [n, a as usize]);
    assert!(acts.iter().all(|v| v.is_finite() && (-1.0..=1.0).contains(v)), "{acts:?}");

    // Checkpoints every 2 updates; --resume goes on from update 4 to the new total.
    let ckpts = config.state_dir.join("checkpoints/ppo");
    assert!(ckpts.join("update-00000004/weights.safetensors").is_file(), "no checkpoint at update 4");
    let o = tradebot(&["train", "ppo", "--config", cfg, "--device", "cpu", "--steps", "384", "--resume", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = json_lines(&o);
    let updates: Vec<u64> =
        lines.iter().filter(|l| l["event"] == "progress").map(|l| l["update"].as_u64().unwrap()).collect();
    assert_eq!(updates, [5, 6], "{lines:?}");
    let done = lines.last().unwrap();
    assert_eq!(done["event"], "done");
    assert_eq!(done["metrics"]["updates"], 6.0);
    assert_ne!(done["model_id"].as_str().unwrap(), id, "the resumed run trained further");
    assert!(reg.load(done["model_id"].as_str().unwrap()).is_ok());
}

#[test]
fn a_run_warm_started_from_a_registered_model_says_so_and_falls_back_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = small_config(dir.path(), &[]);
    let cfg = cfg_path.to_str().unwrap();
    let train = |cfg: &str, extra: &[&str]| {
        let mut args = vec!["train", "ppo", "--config", cfg, "--device", "cpu", "--steps", "64", "--json"];
        args.extend(extra);
        let o = tradebot(&args);
        assert!(o.status.success(), "{}", text(&o));
        json_lines(&o).pop().unwrap()
    };
    let champ = train(cfg, &[]);
    let champ = champ["model_id"].as_str().unwrap().to_string();
    assert!(champ.starts_with("ppo-"), "{champ}");
    let reg = Registry::open(&Config::load(&cfg_path).unwrap().state_dir.join("models")).unwrap();
    assert!(reg.training_state(&champ).is_ok(), "the run's final state is kept with the model");

    let done = train(cfg, &["--warm-start", &champ]);
    assert_eq!(done["warm_start"], serde_json::json!({ "champion": champ, "warm": true }), "{done}");
    let m = reg.get(done["model_id"].as_str().unwrap()).unwrap();
    assert_eq!(m.parent.as_deref(), Some(champ.as_str()), "the manifest names the model it began from");
    assert_eq!(m.params["warm_start"]["warm"], true);

    // Another network: trained from scratch, and the done line and the manifest say why.
    let wider = small_config(dir.path(), &[("hidden = [16, 16]", "hidden = [24, 24]")]);
    let done = train(wider.to_str().unwrap(), &["--warm-start", &champ]);
    assert_eq!(done["warm_start"]["warm"], false, "{done}");
    let why = done["warm_start"]["reason"].as_str().unwrap();
    assert!(why.contains("ppo.hidden") && why.contains("another network"), "{why}");
    let m = reg.get(done["model_id"].as_str().unwrap()).unwrap();
    assert_eq!((m.parent, m.params["warm_start"]["reason"].as_str()), (None, Some(why)));

    let o = tradebot(&["train", "ppo", "--config", cfg, "--resume", "--warm-start", &champ]);
    assert!(!o.status.success() && text(&o).contains("--warm-start"), "{}", text(&o));
}

/// `tradebot train sac --warm-start`: a SAC policy keeps its training state and a SAC run starts from it
/// (the done line and the manifest say so); a PPO policy is refused with the reason, and the run trains
/// from scratch.
#[test]
fn a_sac_run_warm_starts_from_a_sac_policy_and_not_from_a_ppo_one() {
    let dir = tempfile::tempdir().unwrap();
    let sac = "[sac]\nhidden = [16, 16]\nbatch_size = 32\nwarmup_steps = 16\nbuffer_size = 1024\n";
    let cfg_path = small_config(dir.path(), &[("[sac]\n", sac)]);
    let cfg = cfg_path.to_str().unwrap();
    let train = |algorithm: &str, extra: &[&str]| {
        let mut args = vec!["train", algorithm, "--config", cfg, "--device", "cpu", "--steps", "64", "--json"];
        args.extend(extra);
        let o = tradebot(&args);
        assert!(o.status.success(), "{}", text(&o));
        json_lines(&o).pop().unwrap()
    };
    let champ = train("sac", &[])["model_id"].as_str().unwrap().to_string();
    assert!(champ.starts_with("sac-"), "{champ}");
    let reg = Registry::open(&Config::load(&cfg_path).unwrap().state_dir.join("models")).unwrap();
    assert!(reg.training_state(&champ).is_ok(), "the SAC run's final state is kept with the model");

    let done = train("sac", &["--warm-start", &champ]);
    assert_eq!(done["warm_start"], serde_json::json!({ "champion": champ, "warm": true }), "{done}");
    let m = reg.get(done["model_id"].as_str().unwrap()).unwrap();
    assert_eq!(m.parent.as_deref(), Some(champ.as_str()), "the manifest names the model it began from");

    let ppo = train("ppo", &[])["model_id"].as_str().unwrap().to_string();
    let done = train("sac", &["--warm-start", &ppo]);
    assert_eq!(done["warm_start"]["warm"], false, "{done}");
    let why = done["warm_start"]["reason"].as_str().unwrap();
    assert!(why.contains("a SAC run can start only from a SAC policy"), "{why}");
}

#[test]
fn bad_input_is_a_clear_error_and_an_error_line() {
    let dir = tempfile::tempdir().unwrap();
    // No bars in the range.
    let cfg = small_config(
        dir.path(),
        &[("from = \"2005-01-01\"", "from = \"1990-01-01\""), ("to = \"2006-12-31\"", "to = \"1995-12-31\"")],
    );
    let o =
        tradebot(&["train", "ppo", "--config", cfg.to_str().unwrap(), "--device", "cpu", "--steps", "64", "--json"]);
    assert!(!o.status.success());
    let lines = json_lines(&o);
    let last = lines.last().expect("an error line");
    assert_eq!(last["event"], "error");
    assert!(last["message"].as_str().unwrap().contains("no 1Day bars"), "{last}");
    // Episodes longer than the data.
    let cfg = small_config(dir.path(), &[("episode_len = 40", "episode_len = 5000")]);
    let o = tradebot(&["train", "ppo", "--config", cfg.to_str().unwrap(), "--device", "cpu", "--steps", "64"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("env.episode_len = 5000") && !err.contains("panicked"), "{err}");
    let o = tradebot(&["train", "ppo", "--config", cfg.to_str().unwrap(), "--device", "tpu"]);
    assert!(!o.status.success() && text(&o).contains("must be auto, cpu, cuda or cuda:N"), "{}", text(&o));
    // --resume without a checkpoint.
    let cfg = small_config(dir.path(), &[]);
    let o = tradebot(&["train", "ppo", "--config", cfg.to_str().unwrap(), "--device", "cpu", "--resume"]);
    assert!(!o.status.success() && text(&o).contains("no checkpoint"), "{}", text(&o));
}

/// The models registered under the config at `cfg`.
fn registered(cfg: &Path) -> usize {
    let config = Config::load(cfg).unwrap();
    Registry::open(&config.state_dir.join("models")).unwrap().list().unwrap().0.len()
}

#[test]
fn cuda_runs_the_env_kernel_on_the_gpu_or_fails_naming_why_and_auto_says_once_what_ran() {
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = small_config(dir.path(), &[]);
    let cfg = cfg_path.to_str().unwrap();
    let gpu = tradebot::cuda_unusable(0);
    let o = tradebot(&["train", "ppo", "--config", cfg, "--device", "cuda", "--steps", "64", "--json"]);
    let lines = json_lines(&o);
    let last = lines.last().expect("a last line");
    let err = String::from_utf8_lossy(&o.stderr);
    match &gpu {
        // A GPU machine: the env kernel ran there, and the lines and the manifest say so.
        None => {
            assert!(o.status.success(), "{}", text(&o));
            assert_eq!((last["device"].as_str(), last["env"].as_str()), (Some("cuda:0"), Some("kernel")), "{last}");
        }
        // No GPU: refused with the reason, nothing trained on the CPU in its place, nothing registered.
        Some(why) => {
            assert_eq!(o.status.code(), Some(1), "{}", text(&o));
            assert_eq!(last["event"], "error", "{lines:?}");
            let message = last["message"].as_str().unwrap();
            assert!(message.contains("--device cuda:0: no usable CUDA device") && message.contains(why), "{message}");
            assert!(err.contains(why.as_str()) && !err.contains("panicked"), "{err}");
            assert!(lines.iter().all(|l| l["event"] != "progress"), "no training on the CPU instead: {lines:?}");
            assert_eq!(registered(&cfg_path), 0, "no model registered");
        }
    }
    // auto: CUDA when usable, else the CPU with one WARN naming why; every line and the manifest say which.
    let o = tradebot(&["train", "ppo", "--config", cfg, "--device", "auto", "--steps", "64", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let warns: Vec<&str> = err.lines().filter(|l| l.contains(" WARN ")).collect();
    let want = match &gpu {
        None => ("cuda:0", "kernel"),
        Some(why) => {
            assert_eq!(warns.len(), 1, "one WARN: {err}");
            assert!(warns[0].contains("--device auto: no usable CUDA device") && warns[0].contains(why), "{err}");
            ("cpu", "VecEnv")
        }
    };
    let lines = json_lines(&o);
    for l in &lines {
        assert_eq!((l["device"].as_str(), l["env"].as_str()), (Some(want.0), Some(want.1)), "{l}");
        assert_eq!(l["device_requested"], "auto", "{l}");
    }
    let done = lines.last().unwrap();
    assert_eq!(done["event"], "done");
    let config = Config::load(&cfg_path).unwrap();
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let (m, _) = reg.load(done["model_id"].as_str().unwrap()).unwrap();
    let on = &m.params["trained_on"];
    assert_eq!(
        (on["device"].as_str(), on["env"].as_str(), on["requested"].as_str()),
        (Some(want.0), Some(want.1), Some("auto"))
    );
}

#[test]
fn bench_ppo_states_its_configuration_and_refuses_bad_arguments() {
    let o = tradebot(&[
        "bench",
        "ppo",
        "--assets",
        "2",
        "--days",
        "60",
        "--steps",
        "64",
        "--n-steps",
        "32",
        "--batch-size",
        "16",
        "--epochs",
        "1",
        "--hidden",
        "8,8",
        "--min-seconds",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["updates"].as_u64(), v["runs"].as_u64(), v["env_steps"].as_u64()),
        (Some(2), Some(1), Some(64)),
        "{v}"
    );
    assert_eq!(v["hidden"], serde_json::json!([8, 8]));
    assert_eq!(v["obs_dim"], 1 + 2 * 2, "cash, then holding and one feature per asset");
    let (rate, secs) = (v["env_steps_per_s"].as_f64().unwrap(), v["seconds"].as_f64().unwrap());
    assert!(secs > 0.0 && rate.is_finite() && rate > 0.0, "{v}");
    assert_eq!(
        (v["env"].as_str(), v["device"].as_str()),
        (Some("VecEnv"), Some("cpu")),
        "on the CPU: VecEnv unless asked"
    );
    // A run shorter than --min-seconds is repeated from fresh weights until that much training time has passed.
    let args = ["bench", "ppo", "--assets", "2", "--days", "60", "--steps", "64", "--n-steps", "32"];
    let o = tradebot(&[&args[..], &["--batch-size", "16", "--epochs", "1", "--hidden", "8,8", "--json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (runs, secs) = (v["runs"].as_u64().unwrap(), v["seconds"].as_f64().unwrap());
    assert!(runs > 1 && secs >= 0.5, "a run of 64 steps was not lengthened to 0.5 s: {v}");
    assert_eq!(v["env_steps"].as_u64(), Some(64 * runs), "{v}");
    let o = tradebot(&["bench", "ppo", "--min-seconds=-1"]);
    assert!(!o.status.success() && text(&o).contains("--min-seconds -1"), "{}", text(&o));
    let o = tradebot(&["bench", "ppo", "--steps", "0"]);
    assert!(!o.status.success() && text(&o).contains("at least 1"), "{}", text(&o));
    // The env kernel (the GPU's env) runs on CPU tensors too, with the libtorch trainer CUDA runs.
    let args = ["bench", "ppo", "--assets", "2", "--days", "60", "--steps", "64", "--n-steps", "32"];
    let o = tradebot(
        &[
            &args[..],
            &["--batch-size", "16", "--env", "kernel", "--cpu-backend", "libtorch", "--min-seconds", "0", "--json"],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["env"].as_str(), v["env_steps"].as_u64()), (Some("kernel"), Some(64)), "{v}");
    let o = tradebot(&[&args[..], &["--env", "gpu"]].concat());
    assert!(!o.status.success() && text(&o).contains("auto, kernel or vec"), "{}", text(&o));
}
