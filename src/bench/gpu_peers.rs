//! The Python peers of `tradebot bench gpu`, on the same GPU in the same run: Stable-Baselines3 2.9.2 PPO
//! with 32 `SubprocVecEnv` workers stepping FinRL's numpy env (`benches/peers/sb3_ppo.py`, at [256, 256]
//! and at [2048, 1024, 512], the setup of the report this project grew from) and the PyTorch DataLoader
//! LSTM loop on the data our LSTM measurement dumps (`benches/peers/lstm_torch.py`). Each is compared with
//! our measurement of the same work, as a ratio row.
//!
//! A GPU machine has no package index: the pure-Python wheels the peers need (SB3, gymnasium and theirs,
//! and FinRL's wheel for its env file) come from a wheelhouse carried with the binary (`make gpu-kit`),
//! installed with `pip --no-index --no-deps --target` into a folder of their own beside it; PyTorch and
//! NumPy are the machine's.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Our search measurement's name: `gpu::plan` runs it under this name, and the search's ratio row finds
/// its figures by it.
pub const SEARCH: &str = "search: 64 trials of [256, 256] as one population";

/// The wheels a peer needs besides PyTorch and NumPy (`make gpu-kit` downloads them, pinned).
pub const WHEELS: [&str; 5] = [
    "stable-baselines3==2.9.2",
    "gymnasium==1.4.0",
    "cloudpickle==3.1.3",
    "farama-notifications==0.0.6",
    "typing-extensions==4.16.0",
];

/// One peer measurement: its script and arguments, and the measurement of ours it is compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    /// How the measurement is labelled in the report.
    pub name: String,
    /// The peer's Python script, in the peers' folder.
    pub script: &'static str,
    /// The script's command-line arguments.
    pub args: Vec<String>,
    /// Our measurement's name (`gpu::plan`) and the figure compared, higher is better.
    pub against: String,
    /// The key of the figure compared in both measurements' JSON (e.g. `env_steps_per_s`).
    pub figure: &'static str,
}

/// The peers: SB3 at both PPO sizes with 32 worker processes (4 in the quick check, which only shows that
/// each peer runs), and the DataLoader LSTM on `lstm_data`.
pub fn plan(quick: bool, lstm_data: &Path) -> Vec<Peer> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    // `workers` envs x 64 steps per update: 2 updates quick, 4 otherwise; a minibatch at most one rollout.
    let workers: usize = if quick { 4 } else { 32 };
    let steps = (workers * 64 * if quick { 2 } else { 4 }).to_string();
    let batch = (workers * 64).min(2048).to_string();
    let mut out = Vec::new();
    for (name, hidden) in [("[256, 256]", "256,256"), ("[2048, 1024, 512]", "2048,1024,512")] {
        let envs = workers.to_string();
        out.push(Peer {
            name: format!("peer: SB3 2.9.2 PPO {name}, {workers} SubprocVecEnv workers on FinRL's numpy env"),
            script: "sb3_ppo.py",
            args: s(&["--device", "cuda", "--envs", &envs, "--subproc", "--hidden", hidden, "--n-steps", "64"])
                .into_iter()
                .chain(s(&["--batch-size", &batch, "--epochs", "4", "--steps", &steps]))
                .collect(),
            against: format!("PPO {name} E=4096"),
            figure: "env_steps_per_s",
        });
    }
    out.push(Peer {
        name: "peer: PyTorch LSTM with a DataLoader, batch 3072".into(),
        script: "lstm_torch.py",
        args: vec![lstm_data.display().to_string(), "--batch".into(), "3072".into()],
        against: "LSTM epoch, batch 3072".into(),
        figure: "samples_per_sec",
    });
    out
}

/// Why the peers' wheels could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The Python interpreter could not be started.
    #[error("cannot run {python}: {source}")]
    Run {
        /// The interpreter's command.
        python: String,
        /// Why it could not be started.
        source: std::io::Error,
    },
    /// `pip install` from the wheelhouse failed.
    #[error(
        "installing the peers' wheels from {} failed (run `make gpu-kit` where PyPI is reachable): {stderr}",
        wheelhouse.display()
    )]
    Pip {
        /// The folder of wheels installed from.
        wheelhouse: PathBuf,
        /// What pip wrote to stderr.
        stderr: String,
    },
}

/// Installs [`WHEELS`] from `wheelhouse` into `wheelhouse/site` (once) for `python`; returns that folder,
/// for `PYTHONPATH`.
pub fn install(python: &str, wheelhouse: &Path) -> Result<PathBuf, InstallError> {
    let site = wheelhouse.join("site");
    if site.join("stable_baselines3").is_dir() {
        return Ok(site);
    }
    let out = std::process::Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--find-links"])
        .arg(wheelhouse)
        .arg("--target")
        .arg(&site)
        .args(WHEELS)
        .output()
        .map_err(|source| InstallError::Run { python: python.to_string(), source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(InstallError::Pip { wheelhouse: wheelhouse.to_path_buf(), stderr });
    }
    Ok(site)
}

/// The search's ratio row: our population's trials per hour over Stable-Baselines3's on the same GPU, its
/// trials run one after another (as Optuna runs them on one device) at the env-steps per second its
/// [256, 256] row measured, each trial the same steps as ours. Derived from the two measured rows.
pub fn search_ratio(ours: &[Value], peers: &[Value]) -> Option<Value> {
    let search = ours.iter().find(|r| r["measure"] == SEARCH)?;
    let sb3 = peers
        .iter()
        .find(|r| r["measure"].as_str().is_some_and(|m| m.starts_with("peer: SB3") && m.contains("[256, 256]")))?;
    let steps = search["result"]["steps_per_trial"].as_f64().filter(|s| *s > 0.0);
    let sps = sb3["result"]["env_steps_per_s"].as_f64().filter(|s| s.is_finite() && *s > 0.0);
    let theirs = steps.zip(sps).map(|(steps, sps)| sps * 3600.0 / steps);
    let ratio = theirs.zip(search["result"]["trials_per_hour"].as_f64()).map(|(t, o)| o / t).filter(|r| r.is_finite());
    let ok = search["ok"] == true && sb3["ok"] == true && ratio.is_some();
    Some(serde_json::json!({
        "measure": "ratio: the search's trials per hour / SB3's, its trials one after another at its [256, 256] env-steps/s",
        "command": "-", "ok": ok, "result": {"ratio": ratio, "peer_trials_per_hour": theirs}, "gpu": null,
        "error": (!ok).then_some("a row failed or lacks the figure"),
    }))
}

/// `ours / peer` for the compared figure, where both rows ran and carry it.
pub fn ratio(ours: &Value, peer: &Value, figure: &str) -> Option<f64> {
    let get = |row: &Value| row["result"].get(figure).and_then(Value::as_f64).filter(|x| x.is_finite() && *x > 0.0);
    (ours["ok"] == true && peer["ok"] == true).then_some(())?;
    Some(get(ours)? / get(peer)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_is_compared_with_one_of_our_measurements() {
        let ours: Vec<String> = super::super::gpu::plan(false).into_iter().map(|(name, _)| name).collect();
        let peers = plan(false, Path::new("target/bench-gpu/lstm"));
        assert_eq!(peers.len(), 3);
        for p in &peers {
            assert!(ours.contains(&p.against), "{} is compared with {}, not measured", p.name, p.against);
            assert!(Path::new("benches/peers").join(p.script).is_file(), "{}", p.script);
        }
        assert!(peers[1].args.windows(2).any(|w| w == ["--hidden", "2048,1024,512"]));
        assert!(peers[0].args.contains(&"--subproc".to_string()) && peers[0].args.contains(&"cuda".to_string()));
        assert!(peers[0].args.windows(2).any(|w| w == ["--envs", "32"]), "{:?}", peers[0].args);
    }

    /// The quick check starts 4 workers a peer, not 32, each update one minibatch of its whole rollout, and
    /// still compares each peer with our measurement of the same name.
    #[test]
    fn the_quick_peers_start_four_workers_and_keep_their_comparisons() {
        let ours: Vec<String> = super::super::gpu::plan(true).into_iter().map(|(name, _)| name).collect();
        let peers = plan(true, Path::new("target/bench-gpu/lstm"));
        let arg = |p: &Peer, flag: &str| p.args.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone());
        for p in &peers[..2] {
            assert_eq!(arg(p, "--envs").as_deref(), Some("4"), "{:?}", p.args);
            assert_eq!(arg(p, "--batch-size").as_deref(), Some("256"), "{:?}", p.args);
            assert_eq!(arg(p, "--steps").as_deref(), Some("512"), "{:?}", p.args);
            assert!(p.name.contains("4 SubprocVecEnv workers"), "{}", p.name);
            assert!(ours.contains(&p.against), "{} is compared with {}, not measured", p.name, p.against);
        }
    }

    #[test]
    fn the_ratio_needs_both_rows_and_a_positive_figure() {
        let row = |ok: bool, v: f64| serde_json::json!({"ok": ok, "result": {"env_steps_per_s": v}});
        assert_eq!(ratio(&row(true, 2.0e6), &row(true, 5.0e4), "env_steps_per_s"), Some(40.0));
        assert_eq!(ratio(&row(true, 2.0e6), &row(false, 5.0e4), "env_steps_per_s"), None);
        assert_eq!(ratio(&row(true, 2.0e6), &row(true, 0.0), "env_steps_per_s"), None);
        assert_eq!(ratio(&row(true, 2.0e6), &row(true, 1.0), "samples_per_sec"), None);
    }

    #[test]
    fn the_search_ratio_divides_our_trials_per_hour_by_sb3s_trials_run_one_after_another() {
        let ours = vec![serde_json::json!({"measure": SEARCH, "ok": true,
            "result": {"steps_per_trial": 36000.0, "trials_per_hour": 5000.0}})];
        let peer = |ok: bool| {
            vec![
                serde_json::json!({"measure": "peer: SB3 2.9.2 PPO [256, 256], 32 SubprocVecEnv workers on FinRL's numpy env",
            "ok": ok, "result": {"env_steps_per_s": 1000.0}}),
            ]
        };
        // SB3: 1000 steps/s, 36,000 steps a trial: 100 trials an hour; ours 5000: 50x.
        let row = search_ratio(&ours, &peer(true)).unwrap();
        assert_eq!(row["result"]["ratio"].as_f64(), Some(50.0));
        assert_eq!(row["ok"], true);
        assert_eq!(search_ratio(&ours, &peer(false)).unwrap()["ok"], false);
        assert!(search_ratio(&[], &peer(true)).is_none());
    }

    /// The wheelhouse install refuses clearly when a wheel is missing (an empty wheelhouse here).
    #[test]
    fn an_incomplete_wheelhouse_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let python = crate::runtime_libs::pyenv_python();
        let err = install(&python.to_string_lossy(), dir.path()).unwrap_err().to_string();
        assert!(err.contains("make gpu-kit"), "{err}");
    }
}
