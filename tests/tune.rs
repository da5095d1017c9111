//! `tradebot tune ppo` end to end on the shipped data (issue 21): a small search with early stopping whose
//! JSON lines end with `done` and the best trial's registered candidate, the same trials again for the
//! same seed, `tune list|show`, and the Optuna journal loaded by Optuna's own `JournalStorage` with the
//! same best trial. Optuna comes from PyPI into the project's venv (`make test` installs it); without it
//! the journal test fails.
#![cfg(feature = "train")]

mod common;

use common::{demo_config, text, tradebot, write_config};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tradebot::Config;
use tradebot::models::{ModelState, Registry};

fn small_config(dir: &Path) -> PathBuf {
    let mut s = demo_config(dir);
    for (a, b) in [
        ("[env]\n", "[env]\nn_envs = 4\nepisode_len = 40\n"),
        // The demo's own search sizing: these tests set their own.
        ("trials = 8\nparallel = 2\nbudget_steps = 32768\nalgorithms = [\"ppo\", \"sac\"]\n", ""),
        ("window_days = 3650\nholdout_days = 365", "from = \"2005-01-01\"\nto = \"2007-06-30\""),
    ] {
        assert!(s.contains(a), "the demo config lost {a:?}");
        s = s.replacen(a, b, 1);
    }
    assert!(s.contains("[tune]\n"), "the demo config lost [tune]");
    s = s.replacen(
        "[tune]\n",
        "[tune]\nsampler = \"tpe\"\nstartup_trials = 3\nvalidation_days = 60\nbudget_steps = 576\nmin_steps = 64\n\
         reduction = 3\nseed = 5\n",
        1,
    );
    s.push_str(
        "\n[tune.space]\nlearning_rate = { kind = \"log\", low = 1e-4, high = 3e-3 }\n\
         n_steps = { kind = \"choice\", values = [8, 16] }\nbatch_size = { kind = \"choice\", values = [16, 32] }\n\
         n_epochs = { kind = \"int\", low = 1, high = 3 }\nwidth = { kind = \"choice\", values = [8, 16] }\n\
         clip_range = { kind = \"linear\", low = 0.1, high = 0.3 }\n",
    );
    write_config(dir, &s)
}

/// Runs a search of 7 trials, 3 at a time; returns its JSON lines.
fn search(cfg: &Path, journal: &Path) -> Vec<Value> {
    let (cfg, journal) = (cfg.to_str().unwrap(), journal.to_str().unwrap());
    let args =
        ["tune", "ppo", "--config", cfg, "--trials", "7", "--parallel", "3", "--json", "--optuna-journal", journal];
    let o = tradebot(&args);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// The study as the last `study` line has it.
fn last_study(lines: &[Value]) -> &Value {
    &lines.iter().rfind(|l| l["event"] == "study").expect("a study line")["study"]
}

/// The trials without their times: what a seed must reproduce.
fn trials(study: &Value) -> Vec<Value> {
    let mut out = study["trials"].as_array().unwrap().clone();
    for t in &mut out {
        let t = t.as_object_mut().unwrap();
        for k in ["started_at", "ended_at"] {
            t.remove(k);
        }
        t.get_mut("metrics").and_then(Value::as_object_mut).unwrap().remove("train_seconds");
    }
    out
}

#[test]
fn tune_finds_registers_reproduces_and_exports_to_optuna() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cfg = small_config(a.path());
    let journal = a.path().join("study.journal");
    let lines = search(&cfg, &journal);
    let (done, rest) = lines.split_last().unwrap();
    assert_eq!(done["event"], "done", "{done}");
    let study = last_study(rest);
    assert_eq!(study["rungs"], serde_json::json!([64, 192, 576]));
    let all = trials(study);
    assert_eq!(all.len(), 7);
    let states: Vec<&str> = all.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert!(states.iter().all(|s| ["complete", "pruned"].contains(s)), "{states:?}");
    assert!(states.contains(&"pruned") && states.contains(&"complete"), "successive halving stopped none: {states:?}");
    for t in &all {
        let steps: Vec<u64> = t["curve"].as_array().unwrap().iter().map(|r| r["steps"].as_u64().unwrap()).collect();
        assert!(!steps.is_empty() && steps.windows(2).all(|w| w[0] < w[1]), "{t}");
        if t["state"] == "complete" {
            assert!(*steps.last().unwrap() >= 576, "a complete trial trained its budget: {t}");
        }
    }

    // The best trial's model is a registered candidate.
    let best = study["best"].as_u64().unwrap();
    let model_id = done["model_id"].as_str().unwrap();
    assert_eq!(study["model_id"], model_id);
    let config = Config::load(&cfg).unwrap();
    let (m, _) = Registry::open(&config.state_dir.join("models")).unwrap().load(model_id).unwrap();
    assert_eq!(m.state, ModelState::Candidate);
    let best_trial = all.iter().find(|t| t["number"] == best).unwrap();
    let lr = best_trial["params"]["learning_rate"].as_f64().unwrap();
    assert_eq!(m.params["ppo"]["learning_rate"].as_f64(), Some(lr), "the candidate is the best trial's");

    // The same seed, the same trials.
    let again = search(&small_config(b.path()), &b.path().join("j"));
    let again_study = last_study(&again);
    assert_eq!(trials(again_study), all, "a second search with the same seed differs");
    assert_eq!(again_study["best"], study["best"]);

    // list and show read the store.
    let c = cfg.to_str().unwrap();
    let name = study["name"].as_str().unwrap();
    let o = tradebot(&["tune", "list", "--config", c]);
    assert!(o.status.success() && text(&o).contains(name), "{}", text(&o));
    let o = tradebot(&["tune", "show", "latest", "--config", c]);
    assert!(text(&o).contains(&format!("best: trial {best}, registered as candidate {model_id}")), "{}", text(&o));

    // Optuna's own journal storage reads the study with the same best trial.
    let script = "import json, sys, optuna\n\
        from optuna.storages import JournalStorage\n\
        from optuna.storages.journal import JournalFileBackend\n\
        s = optuna.load_study(study_name=sys.argv[2], storage=JournalStorage(JournalFileBackend(sys.argv[1])))\n\
        b = s.best_trial\n\
        print(json.dumps({'n': len(s.trials), 'best': b.number, 'value': b.value, 'params': b.params,\n\
            'states': [t.state.name.lower() for t in s.trials], 'steps': [sorted(t.intermediate_values) for t in s.trials]}))\n";
    let python = tradebot::pyenv_python();
    let o = std::process::Command::new(&python)
        .args(["-c", script, journal.to_str().unwrap(), name])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run `make venv`)", python.display()));
    assert!(
        o.status.success(),
        "Optuna could not load the journal (is it installed? `make test` installs it): {}",
        text(&o)
    );
    let got: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(got["n"], 7);
    assert_eq!(got["best"], best, "{got}");
    assert_eq!(got["value"].as_f64(), best_trial["curve"].as_array().unwrap().last().unwrap()["value"].as_f64());
    for (k, v) in best_trial["params"].as_object().unwrap() {
        assert_eq!(got["params"][k].as_f64(), v.as_f64(), "{k}: {got}");
    }
    assert_eq!(got["states"], serde_json::json!(states));
    let steps: Vec<Vec<u64>> = all
        .iter()
        .map(|t| t["curve"].as_array().unwrap().iter().map(|r| r["steps"].as_u64().unwrap()).collect())
        .collect();
    assert_eq!(got["steps"], serde_json::json!(steps));
}

/// `--population on` on the CPU (the GPU path's batching): trials of one shape (the space varies the learning
/// rate, clip range, gamma and the env's stop) train as populations: the first wave one population of 3,
/// the trials that replace stopped ones new populations. The search ends with a registered candidate,
/// trials stopped early and trials trained to the budget, and it is the same for the same seed.
#[test]
fn tune_trains_populations_of_one_shape_and_reproduces() {
    let run = |dir: &Path| {
        let cfg = small_config(dir);
        // Populations run on the env kernel, here with the demo's target weights and vs-benchmark reward.
        let s = std::fs::read_to_string(&cfg).unwrap();
        let at = s.rfind("\n[tune.space]").unwrap() + 1;
        let s = format!(
            "{}[tune.space]\nn_steps = {{ kind = \"choice\", values = [16] }}\nlearning_rate = {{ kind = \"log\", low = 1e-4, high = 3e-3 }}\n\
             clip_range = {{ kind = \"linear\", low = 0.1, high = 0.3 }}\ngamma = {{ kind = \"linear\", low = 0.9, high = 0.99 }}\n\
             trailing_stop = {{ kind = \"linear\", low = 0.0, high = 0.1 }}\n",
            &s[..at]
        );
        std::fs::write(&cfg, s).unwrap();
        let c = cfg.to_str().unwrap();
        let o = tradebot(&[
            "tune",
            "ppo",
            "--config",
            c,
            "--trials",
            "6",
            "--parallel",
            "3",
            "--population",
            "on",
            "--json",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let lines: Vec<Value> =
            String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (lines, String::from_utf8_lossy(&o.stderr).to_string())
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (lines, log) = run(a.path());
    assert!(log.contains("trials 0, 1, 2 train as one population"), "{log}");
    assert!(log.contains("trials of one shape batched as populations"), "{log}");
    let (done, rest) = lines.split_last().unwrap();
    assert_eq!(done["event"], "done", "{done}");
    assert!(done["model_id"].as_str().is_some_and(|m| m.starts_with("ppo-")), "{done}");
    let all = trials(last_study(rest));
    assert_eq!(all.len(), 6);
    let states: Vec<&str> = all.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert!(states.contains(&"pruned") && states.contains(&"complete"), "{states:?}");
    for t in all.iter().filter(|t| t["state"] == "complete") {
        let last = t["curve"].as_array().unwrap().last().unwrap()["steps"].as_u64().unwrap();
        assert!(last >= 576, "a complete trial trained its budget: {t}");
    }
    let (again, _) = run(b.path());
    assert_eq!(trials(last_study(&again)), all, "a second search with the same seed differs");
}

#[test]
fn a_bad_tune_section_is_refused_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path());
    let s = std::fs::read_to_string(&cfg).unwrap() + "momentum = { kind = \"linear\", low = 0.1, high = 0.9 }\n";
    std::fs::write(&cfg, s).unwrap();
    let o = tradebot(&["tune", "ppo", "--config", cfg.to_str().unwrap(), "--trials", "2"]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("tune.space.momentum: not a tunable parameter"), "{}", text(&o));
}

/// `bench tune` repeats a search shorter than `--min-seconds` (0.5 s by default), the same trials from fresh
/// weights, and gives the rate over every run; `--min-seconds 0` runs it once.
#[test]
fn bench_tune_lengthens_a_short_search_to_half_a_second() {
    let small = ["bench", "tune", "--trials", "2", "--parallel", "1", "--steps", "32", "--n-steps", "16"];
    let small =
        [&small[..], &["--batch-size", "16", "--hidden", "8", "--assets", "2", "--days", "60", "--json"]].concat();
    let json = |extra: &[&str]| -> Value {
        let o = tradebot(&[&small[..], extra].concat());
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
    };
    let once = json(&["--min-seconds", "0"]);
    assert_eq!((once["runs"].as_u64(), once["env_steps"].as_u64()), (Some(1), Some(2 * 32)), "{once}");
    let v = json(&[]);
    let (runs, secs) = (v["runs"].as_u64().unwrap(), v["seconds"].as_f64().unwrap());
    assert!(runs > 1 && secs >= 0.5, "a search of 2 x 32 steps was not lengthened to 0.5 s: {v}");
    assert_eq!(v["env_steps"].as_u64(), Some(2 * 32 * runs), "{v}");
    let rate = v["trials_per_hour"].as_f64().unwrap();
    assert!((rate - (2 * runs) as f64 / secs * 3600.0).abs() < 1e-6 * rate, "the rate is over every run: {v}");
    assert_eq!(v["values"], once["values"], "every run trains the same trials");
    let o = tradebot(&["bench", "tune", "--min-seconds=-1"]);
    assert!(!o.status.success() && text(&o).contains("--min-seconds -1"), "{}", text(&o));
}

/// `retrain.tune = true`: a PPO retrain runs a search in its child (on the snapshot, within its budget),
/// stores the study from the child's lines, and gates the best trial's model like any candidate.
#[test]
fn a_retrain_with_tune_searches_and_gates_the_best_trial() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path());
    let s = std::fs::read_to_string(&cfg).unwrap();
    let s = s.replacen(
        "to = \"2007-06-30\"",
        "to = \"2007-06-30\"\nholdout_from = \"2007-07-01\"\nholdout_to = \"2008-06-30\"",
        1,
    );
    assert!(s.contains("\ntune = true "), "the demo's PPO retrain is no longer a search (retrain.tune)");
    let s = s.replacen("ppo_steps = 32768", "ppo_steps = 192", 1);
    std::fs::write(&cfg, s).unwrap();
    let c = cfg.to_str().unwrap();
    let o = tradebot(&["retrain", "--config", c, "--kind", "ppo", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(!out.contains("\"event\":\"study\""), "the whole study is stored, not printed: {out}");
    let last: Value = out.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok()).unwrap();
    let record = &last["record"];
    // Whichever way the gate went, the record agrees with the gate's own decision and numbers.
    let promoted = match record["outcome"].as_str() {
        Some("promoted") => true,
        Some("kept") => false,
        other => panic!("the gate judged no candidate: outcome {other:?}: {out}"),
    };
    let candidate = record["candidate"].as_str().unwrap();
    let decision = &record["decision"];
    assert_eq!(decision["promote"].as_bool(), Some(promoted), "{out}");
    let after = if promoted { &record["candidate"] } else { &record["champion_before"] };
    assert_eq!(&record["champion_after"], after, "{out}");
    let (numbers, metrics) = (&decision["numbers"], &record["candidate_metrics"]);
    assert_eq!(numbers["candidate_return"], metrics["total_return"], "the gate judged the stored candidate");
    assert_eq!(numbers["candidate_trades"].as_f64(), metrics["trades"].as_f64(), "{out}");
    if !promoted {
        assert!(!decision["reason"].as_str().unwrap_or("").is_empty(), "a kept candidate says why: {out}");
    }

    let o = tradebot(&["tune", "show", "latest", "--config", c, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let study: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(study["trigger"], "retrain");
    assert_eq!(study["model_id"], candidate, "the gated candidate is the search's best trial's");
    assert_eq!(study["rungs"].as_array().unwrap().last().unwrap(), 192, "ppo_steps is each trial's budget");
    assert_eq!(study["trials"].as_array().unwrap().len(), 32, "tune.trials trials");
}

/// `--time-budget`: training stops when it runs out; a search none of whose trials reached a rung says so,
/// registers nothing and keeps its study (each trial stopped) in the store.
#[test]
fn a_search_out_of_time_before_any_rung_fails_clearly_and_keeps_its_study() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path());
    let c = cfg.to_str().unwrap();
    let o = tradebot(&["tune", "ppo", "--config", c, "--trials", "4", "--parallel", "2", "--time-budget", "0.001s"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("no trial reached the end of its budget or a rung before the time budget ran out"),
        "{}",
        text(&o)
    );
    let o = tradebot(&["tune", "show", "latest", "--config", c, "--json"]);
    let study: Value = serde_json::from_slice(&o.stdout).unwrap();
    let states: Vec<&str> = study["trials"].as_array().unwrap().iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["stopped", "stopped"], "no new trial starts after the budget");
    assert!(study["model_id"].is_null() && study["error"].is_string(), "{study}");
    let config = Config::load(&cfg).unwrap();
    assert!(Registry::open(&config.state_dir.join("models")).unwrap().list().unwrap().0.is_empty());
    let o = tradebot(&["tune", "ppo", "--config", c, "--time-budget", "2d"]);
    assert!(text(&o).contains("the unit must be s, m or h"), "{}", text(&o));
}
