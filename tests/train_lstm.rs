//! `tradebot train lstm` end to end on the shipped bars in a temporary state directory: JSON lines ending
//! in `done`, the model in the registry with the LSTM contract's manifest, ONNX Runtime returning
//! probabilities; too few bars refused with an `error` line.
#![cfg(feature = "train")]

mod common;

use common::{demo_config, tradebot, write_config};
use std::path::{Path, PathBuf};
use std::process::Output;
use tradebot::models::{ModelKind, Registry};

/// The demo config with its state under `dir`, a small fast model, and `edit` applied.
fn config(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let text = demo_config(dir).replace(
            "[lstm]\n",
            "[lstm]\nfast_len = 12\nslow_len = 4\nslow_factor = 5\nhorizon = 5\nbatch_size = 512\nfast_hidden = 8\nslow_hidden = 8\n",
        );
    write_config(dir, &edit(text))
}

fn train(cfg: &Path) -> (Output, Vec<serde_json::Value>) {
    let out =
        tradebot(&["train", "lstm", "--config", cfg.to_str().unwrap(), "--epochs", "2", "--device", "cpu", "--json"]);
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    (out, lines)
}

#[test]
fn trains_registers_and_onnx_runtime_gives_probabilities() {
    let dir = tempfile::tempdir().unwrap();
    let (out, lines) = train(&config(dir.path(), |s| s));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let epochs = lines.iter().filter(|l| l["event"] == "epoch").count();
    assert_eq!(epochs, 2);
    let done = lines.last().unwrap();
    assert_eq!(done["event"], "done");
    let id = done["model_id"].as_str().unwrap();
    let val_mcc = done["metrics"]["val_mcc"].as_f64().unwrap();
    // The model registered is the best epoch's (restored after training): its validation MCC is the
    // highest any epoch line reported, at the epoch the metrics name (the first such on a tie).
    let mut best = (0u64, f64::NEG_INFINITY);
    for l in lines.iter().filter(|l| l["event"] == "epoch") {
        let mcc = l["val_mcc"].as_f64().unwrap();
        if mcc > best.1 {
            best = (l["epoch"].as_u64().unwrap(), mcc);
        }
    }
    assert_eq!(done["metrics"]["best_epoch"].as_f64(), Some(best.0 as f64), "{done}");
    assert!((val_mcc - best.1).abs() < 1e-6, "registered val MCC {val_mcc}, best epoch's {}", best.1);
    let test_mcc = done["metrics"]["test_mcc"].as_f64().unwrap();

    let reg = Registry::open(&dir.path().join("state/models")).unwrap();
    let (m, bytes) = reg.load(id).unwrap();
    assert_eq!(m.kind, ModelKind::Lstm);
    assert_eq!(m.metrics["val_mcc"], val_mcc);
    assert_eq!(m.metrics["test_mcc"], test_mcc, "the registered test MCC is the run's");
    assert_eq!((m.params["fast_len"].as_u64(), m.params["slow_len"].as_u64()), (Some(12), Some(4)));
    assert_eq!((m.params["slow_factor"].as_u64(), m.params["horizon"].as_u64()), (Some(5), Some(5)));
    assert_eq!(m.params["up_threshold"].as_f64(), Some(0.02));
    assert_eq!(m.params["down_threshold"].as_f64(), Some(-0.02));
    let spec = tradebot::FeatureSpec::default();
    let context = tradebot::context_names(&spec);
    assert_eq!(m.params["context"], serde_json::json!(context));
    assert_eq!(m.features.names, spec.names());
    let nf = spec.n_cols() as i64;
    let shapes: Vec<(&str, Vec<i64>)> = m.inputs.iter().map(|i| (i.name.as_str(), i.shape.clone())).collect();
    assert_eq!(
        shapes,
        [("x_fast", vec![-1, 12, nf]), ("x_slow", vec![-1, 4, nf]), ("x_context", vec![-1, context.len() as i64])]
    );
    assert_eq!((m.outputs[0].name.as_str(), m.outputs[0].shape.clone()), ("probs", vec![-1, 3]));

    let rt = tradebot::init_onnxruntime(None).unwrap();
    let mut s = ort::session::Session::builder(&rt.env).unwrap().commit_from_memory(&bytes).unwrap();
    let fill = |shape: Vec<usize>| {
        let n = shape.iter().product::<usize>();
        ndarray::ArrayD::from_shape_vec(shape, (0..n).map(|i| ((i * 37) % 11) as f32 / 10.0 - 0.5).collect()).unwrap()
    };
    let (f, sl, c) = (fill(vec![7, 12, nf as usize]), fill(vec![7, 4, nf as usize]), fill(vec![7, context.len()]));
    let out = s
        .run(ort::inputs![
            "x_fast" => ort::value::TensorRef::from_array_view(f.view()).unwrap(),
            "x_slow" => ort::value::TensorRef::from_array_view(sl.view()).unwrap(),
            "x_context" => ort::value::TensorRef::from_array_view(c.view()).unwrap(),
        ])
        .unwrap();
    let p = out["probs"].try_extract_array::<f32>().unwrap();
    assert_eq!(p.shape(), [7, 3]);
    for row in p.outer_iter() {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5 && row.iter().all(|&x| x > 0.0), "{row:?}");
    }
    assert!(dir.path().join("state/checkpoints/lstm/best.safetensors").is_file());
}

/// The number after `before` in `m`.
fn number_after(m: &str, before: &str) -> usize {
    let rest = &m[m.find(before).unwrap_or_else(|| panic!("{before:?} in {m}")) + before.len()..];
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap_or_else(|e| panic!("{m}: {e}"))
}

#[test]
fn too_little_data_is_one_error_naming_the_samples_the_need_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), |s| {
        s.replace(
            "window_days = 3650\nholdout_days = 365",
            "from = \"2010-05-01\"\nto = \"2010-12-31\"\nholdout_from = \"2011-01-01\"",
        )
    });
    let (out, lines) = train(&cfg);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "error");
    let m = last["message"].as_str().unwrap();
    assert!(m.starts_with("not enough data for the LSTM: "), "{m}");
    let (n, need) = (number_after(m, "LSTM: "), number_after(m, "need "));
    assert!(n < need && need == 300, "{m}");
    assert!(m.contains("per symbol over ") && m.contains("tradebot data import"), "{m}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("WARN"), "one error, no warnings: {err}");
    assert!(lines.iter().all(|l| l["event"] != "epoch"), "nothing trained: {lines:?}");
}

/// The paper walkthrough's retrain: 600 days of the demo's day bars (AAPL, MSFT, IBM) and a 60-day
/// holdout, the history held to the same 600 days. The configured window leaves 113 samples per symbol;
/// sized to the data, the candidate carries cut-offs and enters a position on its holdout.
#[test]
fn six_hundred_days_of_the_demo_pooled_give_a_candidate_that_trades_its_holdout() {
    let dir = tempfile::tempdir().unwrap();
    let text = demo_config(dir.path())
        .replace("window_days = 3650\nholdout_days = 365", "window_days = 600\nholdout_days = 60")
        .replace("[lstm]\n", "[lstm]\nhistory_days = 600\n");
    let cfg = write_config(dir.path(), &text);
    let args = ["train", "lstm", "--config", cfg.to_str().unwrap(), "--epochs", "10", "--device", "cpu", "--json"];
    let out = tradebot(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let done: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let id = done["model_id"].as_str().unwrap();
    let config = tradebot::Config::load(&cfg).unwrap();
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let (m, _) = reg.load(id).unwrap();
    let default = tradebot::LstmConfig::default();
    assert!(m.params.contains_key("prob_up_cutoff"), "cut-offs chosen on validation: {:?}", m.metrics);
    assert!(m.params["slow_factor"].as_u64().unwrap() < default.slow_factor as u64, "{:?}", m.params);
    let store = tradebot::store::Store::open(&config.state_dir).unwrap();
    let ev = tradebot::retrain::holdout::holdout_evaluator(&config, &store);
    let as_of = chrono::NaiveDate::from_ymd_opt(2011, 8, 31).unwrap().and_hms_opt(23, 0, 0).unwrap().and_utc();
    ev.check(id).unwrap();
    let holdout = ev.evaluate_at(id, as_of).unwrap();
    eprintln!("window {:?}, metrics {:?}, holdout {:?}", m.params, m.metrics, holdout.clone().summary());
    assert!(holdout.trades >= 1, "the candidate enters a position on its holdout: {:?}", holdout.clone().summary());
    assert!(err.contains("the LSTM's window is sized to its data"), "{err}");
}

/// The LSTM's processes run with libtorch's threads spinning only briefly before they sleep while they wait
/// (libgomp's `GOMP_SPINCOUNT=3000`), unless the user chose how they wait; `bench lstm` reports what it ran
/// with.
#[test]
fn lstm_processes_spin_briefly_unless_the_user_chose() {
    let bench = |envs: &[(&str, &str)]| {
        let mut c = common::command(&["bench", "lstm", "--samples", "1024", "--batch", "512", "--json"]);
        c.env_remove("OMP_WAIT_POLICY").env_remove("GOMP_SPINCOUNT").envs(envs.iter().copied());
        let o = c.output().expect("tradebot runs");
        assert!(o.status.success(), "{}", common::text(&o));
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", common::text(&o)));
        (v["omp_wait_policy"].clone(), v["gomp_spincount"].clone())
    };
    let null = serde_json::Value::Null;
    assert_eq!(bench(&[]), (null.clone(), "3000".into()));
    assert_eq!(bench(&[("OMP_WAIT_POLICY", "active")]), ("active".into(), null.clone()));
    assert_eq!(bench(&[("GOMP_SPINCOUNT", "1000")]), (null, "1000".into()));
}

/// On the CPU a minibatch's gradient is taken in as many parts as libtorch has threads, one thread each;
/// with one thread, in one pass. `bench lstm` reports both.
#[test]
fn lstm_minibatches_are_cut_into_one_part_per_thread_on_the_cpu() {
    let bench = |threads: &str| {
        let mut c = common::command(&["bench", "lstm", "--samples", "1024", "--batch", "512", "--json"]);
        c.env("OMP_NUM_THREADS", threads);
        let o = c.output().expect("tradebot runs");
        assert!(o.status.success(), "{}", common::text(&o));
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", common::text(&o)));
        (v["threads"].as_i64(), v["parts"].as_i64(), v["samples_per_sec"].as_f64().is_some_and(|s| s > 0.0))
    };
    assert_eq!(bench("2"), (Some(2), Some(2), true));
    assert_eq!(bench("1"), (Some(1), Some(1), true));
}
