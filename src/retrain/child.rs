//! The training child: `tradebot train ...` (the same binary) run as a separate process, so that a CUDA
//! abort, an out-of-memory kill or a hang in training cannot touch trading. Its stdout is JSON lines
//! (`{"event":"progress"|"epoch"|"done"|"error", ...}`), read as they come; its stderr goes to the log.
//! It is killed when it outlives its time budget, when its resident memory exceeds its memory budget
//! (`retrain::memory`), or, where `nvidia-smi` exists, when its GPU memory exceeds the budget. Every way it can end is a `ChildOutcome`, never a panic.

use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Set for the child: our pid. The child asks the kernel to kill it when we die
/// (`die_with_parent`, called first thing by `tradebot train`), so that no path out of the daemon or of a foreground
/// `tradebot retrain` (SIGKILL included) leaves a trainer running under PID 1.
pub const PARENT_PID_ENV: &str = "TRADEBOT_PARENT_PID";

/// Kills the child's process group when dropped: every way out of `run` (an end, a timeout, the future
/// dropped on cancellation), whatever the child started itself. A group already gone is no error.
struct GroupKill(Option<u32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// A line of the child's stderr without the child's own timestamp, level and target (our logger adds
/// its own), at the child's level: `2026-01-02T03:04:05.678Z INFO  tradebot::training::ppo: msg` is
/// (Info, "msg"). Other lines are kept whole at INFO.
fn child_line(line: &str) -> (log::Level, &str) {
    let mut parts = line.splitn(3, char::is_whitespace);
    let (Some(time), Some(level)) = (parts.next(), parts.next()) else { return (log::Level::Info, line) };
    let (Ok(level), true) = (level.parse::<log::Level>(), time.ends_with('Z') && time.contains('T')) else {
        return (log::Level::Info, line);
    };
    let rest = parts.next().unwrap_or("").trim_start();
    let msg = rest.split_once(": ").filter(|(t, _)| !t.contains(' ')).map_or(rest, |(_, m)| m);
    (level, msg)
}

/// Variables the training child may inherit: the system's basics, the native libraries' and the GPU's
/// settings, logging, and tradebot's own non-secret ones. Everything else (APCA_* keys,
/// CREDENTIALS_DIRECTORY, TRADEBOT_WEB_TOKEN, NOTIFY_SOCKET, ...) is dropped.
const CHILD_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TZ",
    "TMPDIR",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "LD_LIBRARY_PATH",
    "ORT_DYLIB_PATH",
    "LIBTORCH",
    "OMP_NUM_THREADS",
    "TRADEBOT_PYENV",
    "TRADEBOT_MODELS_DIR",
    "TRADEBOT_PPO_DETERMINISM_SEED",
];
const CHILD_ENV_PREFIXES: &[&str] = &["LC_", "CUDA_", "NVIDIA_", "PYTORCH_", "MKL_"];

/// The allowed part of `parent` (the daemon's environment).
pub fn child_env(
    parent: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    parent
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            CHILD_ENV.contains(&k.as_ref()) || CHILD_ENV_PREFIXES.iter().any(|p| k.starts_with(p))
        })
        .collect()
}

/// In the training child (`tradebot train` started by `run`): asks the kernel to SIGKILL this process
/// when the parent that started it dies, and exits at once if it already has. Outside a retrain (the
/// variable unset) it does nothing. The death signal follows the parent's thread that spawned us: `run`
/// spawns from an async task, whose runtime threads live as long as the runtime.
pub fn die_with_parent() {
    let Some(parent) = std::env::var(PARENT_PID_ENV).ok().and_then(|p| p.parse::<i32>().ok()) else {
        return;
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
        eprintln!("cannot ask to die with the parent process {parent}: {e}");
    }
    // Under memory pressure the kernel kills the trainer, not the daemon beside it (with the unit's
    // OOMPolicy=continue, that ends only the retrain, recorded as failed; trading goes on).
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", "500") {
        eprintln!("cannot make the trainer the first choice of the OOM killer: {e}");
    }
    if nix::unistd::getppid().as_raw() != parent {
        eprintln!("the retrain that started this trainer (pid {parent}) has ended: stopping");
        std::process::exit(1);
    }
}

/// What to run and within which limits.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The executable to start: the `tradebot` binary itself, or a stand-in in tests.
    pub program: PathBuf,
    /// Its arguments, passed as they are (`train ...` and the options of the job).
    pub args: Vec<OsString>,
    /// How long it may run, from its start; past it, its process group is killed (`ChildFailure::Timeout`).
    pub time_budget: Duration,
    /// 0 = no GPU memory cap.
    pub gpu_memory_mb: u64,
    /// 0 = no memory cap (the resident memory of its process group, checked twice a second).
    pub memory_mb: u64,
    /// Extra environment variables for the child (the snapshot path, the GPU memory budget).
    pub env: Vec<(OsString, OsString)>,
}

/// How a training child ended: a model registered, or a failure that says why.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildOutcome {
    /// The child registered a model and said so in its `done` line.
    Done {
        /// The registry id of the model it registered (the run's candidate).
        model_id: String,
        /// The figures of its `done` line (e.g. `mean_return`, `env_steps`, `train_seconds`), by name.
        metrics: BTreeMap<String, f64>,
    },
    /// It ended without a model; the failure says how.
    Failed(ChildFailure),
}

/// Why a training child produced no model; `code()` gives each a stable code for records and metrics.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChildFailure {
    /// The process could not be started (a missing or non-executable program).
    #[error("cannot start {program}: {reason}")]
    Spawn {
        /// The program as given.
        program: String,
        /// The operating system's error.
        reason: String,
    },
    /// It outlived its time budget (the `Duration`) and was killed.
    #[error("training ran past its budget of {0:?} and was killed")]
    Timeout(Duration),
    /// Its GPU memory, as `nvidia-smi` reports it, went over the budget and it was killed.
    #[error("training used {used_mb} MiB of GPU memory, over its budget of {budget_mb} MiB, and was killed")]
    GpuMemory {
        /// The GPU memory it held, in MiB.
        used_mb: u64,
        /// The budget it went over, in MiB.
        budget_mb: u64,
    },
    /// The resident memory of its process group went over `retrain.memory_mb` and it was killed.
    #[error(
        "training used {used_mb} MiB of memory, over its budget of {budget_mb} MiB (retrain.memory_mb), and was killed; trading goes on"
    )]
    Memory {
        /// The resident memory of its process group, in MiB.
        used_mb: u64,
        /// `retrain.memory_mb`, in MiB.
        budget_mb: u64,
    },
    /// It wrote an `error` line (the message, e.g. a NaN loss or too little data) and stopped.
    #[error("training reported an error: {0}")]
    Reported(String),
    /// It exited (or was killed by a signal) before its `done` line.
    #[error("training exited with {status} without finishing{}", last.as_ref().map(|l| format!(" (last output: {l})")).unwrap_or_default())]
    Crashed {
        /// Its exit status (or why its output could not be read).
        status: String,
        /// Its last line of stdout, if any.
        last: Option<String>,
    },
    /// It exited with status 0 but never wrote a `done` line naming a model.
    #[error("training exited successfully but reported no model")]
    NoModel,
}

impl ChildFailure {
    /// The stable code of the failure, for records and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            ChildFailure::Spawn { .. } => "spawn",
            ChildFailure::Timeout(_) => "timeout",
            ChildFailure::GpuMemory { .. } => "gpu_memory",
            ChildFailure::Memory { .. } => "memory",
            ChildFailure::Reported(_) => "reported",
            ChildFailure::Crashed { .. } => "crash",
            ChildFailure::NoModel => "no_model",
        }
    }
}

/// Runs the child to its end. `on_line` sees every JSON line (progress for status and the dashboard).
/// Cancellation-safe: dropping the future kills the child (`kill_on_drop`).
pub async fn run(spec: &ChildSpec, mut on_line: impl FnMut(&Value)) -> ChildOutcome {
    let mut child = match spawn(spec) {
        Ok(c) => c,
        Err(f) => return ChildOutcome::Failed(f),
    };
    let pid = child.id();
    let _group = GroupKill(pid);
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let (level, msg) = child_line(&l);
                log::log!(level, "train: {msg}");
            }
        });
    }
    let Some(stdout) = child.stdout.take() else {
        return ChildOutcome::Failed(ChildFailure::Crashed { status: "no stdout".into(), last: None });
    };
    let deadline = tokio::time::Instant::now() + spec.time_budget;
    let mut seen = Seen::default();
    if let Some(f) = watch(spec, pid, stdout, deadline, &mut seen, &mut on_line).await {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return ChildOutcome::Failed(f);
    }
    let Seen { done, reported, last } = seen;
    let status = match tokio::time::timeout_at(deadline, child.wait()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return ChildOutcome::Failed(ChildFailure::Crashed { status: e.to_string(), last }),
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return ChildOutcome::Failed(ChildFailure::Timeout(spec.time_budget));
        }
    };
    if let Some(msg) = reported {
        return ChildOutcome::Failed(ChildFailure::Reported(msg));
    }
    if !status.success() {
        return ChildOutcome::Failed(ChildFailure::Crashed { status: status.to_string(), last });
    }
    match done.as_ref().and_then(|d| d.get("model_id")).and_then(Value::as_str) {
        Some(id) => ChildOutcome::Done { model_id: id.to_string(), metrics: metrics_of(done.as_ref()) },
        None => ChildOutcome::Failed(ChildFailure::NoModel),
    }
}

/// The child started with its environment and its own process group, its output piped.
fn spawn(spec: &ChildSpec) -> Result<tokio::process::Child, ChildFailure> {
    Command::new(&spec.program)
        .args(&spec.args)
        // A cleared environment plus an allowlist: no Alpaca keys, no credentials directory, no web token.
        .env_clear()
        .envs(child_env(std::env::vars_os()))
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env(PARENT_PID_ENV, std::process::id().to_string())
        // Its own process group: a terminal's Ctrl-C reaches only us, and we kill the whole group.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ChildFailure::Spawn { program: spec.program.display().to_string(), reason: e.to_string() })
}

/// What the child said on its stdout: its `done` line, the message of its `error` line, its last line.
#[derive(Default)]
struct Seen {
    done: Option<Value>,
    reported: Option<String>,
    last: Option<String>,
}

/// Reads the child's JSON lines into `seen` (each passed to `on_line`) until its stdout closes (`None`),
/// or the failure that ends it: past its time budget, over its memory or GPU-memory budget.
async fn watch(
    spec: &ChildSpec,
    pid: Option<u32>,
    stdout: tokio::process::ChildStdout,
    deadline: tokio::time::Instant,
    seen: &mut Seen,
    on_line: &mut impl FnMut(&Value),
) -> Option<ChildFailure> {
    let mut lines = BufReader::new(stdout).lines();
    // Resident memory twice a second (a /proc read); GPU memory every two seconds (it runs nvidia-smi).
    let mut memory_check = tokio::time::interval(Duration::from_millis(500));
    let mut gpu_check = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break Some(ChildFailure::Timeout(spec.time_budget)),
            _ = memory_check.tick(), if spec.memory_mb > 0 => {
                if let Some(pid) = pid
                    && let Some(used) = crate::retrain::memory::group_resident_mb(pid)
                    && used > spec.memory_mb
                {
                    break Some(ChildFailure::Memory { used_mb: used, budget_mb: spec.memory_mb });
                }
            }
            _ = gpu_check.tick(), if spec.gpu_memory_mb > 0 => {
                if let Some(pid) = pid
                    && let Some(used) = gpu_memory_of(pid).await
                    && used > spec.gpu_memory_mb
                {
                    break Some(ChildFailure::GpuMemory { used_mb: used, budget_mb: spec.gpu_memory_mb });
                }
            }
            line = lines.next_line() => match line {
                Ok(Some(l)) => {
                    match serde_json::from_str::<Value>(&l) {
                        Ok(v) => {
                            on_line(&v);
                            match v.get("event").and_then(Value::as_str) {
                                Some("done") => seen.done = Some(v),
                                Some("error") => seen.reported = v.get("message").and_then(Value::as_str).map(str::to_string),
                                _ => {}
                            }
                        }
                        Err(_) => log::info!("train (not JSON): {l}"),
                    }
                    seen.last = Some(l);
                }
                Ok(None) | Err(_) => break None,
            },
        }
    }
}

fn metrics_of(done: Option<&Value>) -> BTreeMap<String, f64> {
    done.and_then(|d| d.get("metrics"))
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x))).collect())
        .unwrap_or_default()
}

/// The child's GPU memory in MiB by `nvidia-smi`; `None` where there is no GPU or no answer.
async fn gpu_memory_of(pid: u32) -> Option<u64> {
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        Command::new("nvidia-smi")
            .args(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    parse_compute_apps(&String::from_utf8_lossy(&out.stdout), pid)
}

/// `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` lines: `pid, MiB`.
fn parse_compute_apps(text: &str, pid: u32) -> Option<u64> {
    text.lines()
        .filter_map(|l| {
            let (p, m) = l.split_once(',')?;
            (p.trim().parse::<u32>().ok()? == pid).then(|| m.trim().parse::<u64>().ok()).flatten()
        })
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, budget_ms: u64) -> ChildSpec {
        ChildSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            time_budget: Duration::from_millis(budget_ms),
            gpu_memory_mb: 0,
            memory_mb: 0,
            env: Vec::new(),
        }
    }

    #[test]
    fn the_childs_log_lines_lose_their_own_timestamp_and_keep_their_level() {
        let l = "2026-11-25T01:46:02.123Z INFO  tradebot::training::ppo: training PPO on cpu";
        assert_eq!(child_line(l), (log::Level::Info, "training PPO on cpu"));
        let w = "2026-11-25T01:46:02.123Z WARN  tradebot::training::lstm: no samples: MSFT";
        assert_eq!(child_line(w), (log::Level::Warn, "no samples: MSFT"));
        assert_eq!(child_line("thread panicked at x.rs:1"), (log::Level::Info, "thread panicked at x.rs:1"));
    }

    #[tokio::test]
    async fn the_child_gets_only_the_allowed_environment() {
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "cargo sets it for tests");
        let mut seen = Vec::new();
        let out = run(
            &sh(
                r#"printf '{"event":"done","model_id":"m","env":"%s"}\n' "$(env | cut -d= -f1 | tr '\n' ' ')""#,
                10_000,
            ),
            |v| {
                if let Some(e) = v.get("env").and_then(Value::as_str) {
                    seen = e.split_whitespace().map(str::to_string).collect();
                }
            },
        )
        .await;
        assert!(matches!(out, ChildOutcome::Done { .. }), "{out:?}");
        assert!(seen.contains(&"PATH".to_string()) && seen.contains(&PARENT_PID_ENV.to_string()), "{seen:?}");
        assert!(!seen.iter().any(|k| k.starts_with("CARGO_")), "the parent's other variables are dropped: {seen:?}");
        let parent = [
            ("APCA_API_SECRET_KEY", "s"),
            ("TRADEBOT_WEB_TOKEN", "t"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("PATH", "/bin"),
        ];
        let kept: Vec<String> = child_env(parent.iter().map(|(k, v)| (k.into(), v.into())))
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["CUDA_VISIBLE_DEVICES", "PATH"]);
    }

    #[tokio::test]
    async fn a_trainer_growing_past_its_memory_budget_is_killed_and_named() {
        // 400 MiB touched, against a 100 MiB budget: killed within a poll, long before its 20 s sleep ends.
        let mut spec = sh("python3 -c 'b = bytearray(400 << 20); import time; time.sleep(20)'", 30_000);
        spec.memory_mb = 100;
        let started = std::time::Instant::now();
        match run(&spec, |_| {}).await {
            ChildOutcome::Failed(f @ ChildFailure::Memory { used_mb, budget_mb: 100 }) => {
                assert!(used_mb > 100, "{f}");
                assert!(f.to_string().contains("retrain.memory_mb"), "the error names the setting: {f}");
            }
            other => panic!("expected a memory failure, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(15), "killed at the budget, not at the end");
        // The same child under a budget it stays within finishes.
        let mut ok =
            sh(r#"python3 -c 'b = bytearray(20 << 20); print("{\"event\":\"done\",\"model_id\":\"m\"}")'"#, 30_000);
        ok.memory_mb = 500;
        assert!(matches!(run(&ok, |_| {}).await, ChildOutcome::Done { .. }));
    }

    #[tokio::test]
    async fn done_line_gives_the_model_and_progress_is_seen() {
        let mut seen = 0;
        let out = run(
            &sh(
                r#"echo '{"event":"progress","steps":10}'; echo 'plain text'; echo '{"event":"done","model_id":"ppo-abc","metrics":{"mean_return":1.5}}'"#,
                10_000,
            ),
            |_| seen += 1,
        )
        .await;
        assert_eq!(
            out,
            ChildOutcome::Done { model_id: "ppo-abc".into(), metrics: BTreeMap::from([("mean_return".into(), 1.5)]) }
        );
        assert_eq!(seen, 2, "the two JSON lines");
    }

    #[tokio::test]
    async fn every_failure_is_an_outcome() {
        let crash = run(&sh(r#"echo '{"event":"progress"}'; kill -9 $$"#, 10_000), |_| {}).await;
        assert!(matches!(crash, ChildOutcome::Failed(ChildFailure::Crashed { .. })), "{crash:?}");
        let nan =
            run(&sh(r#"echo '{"event":"error","message":"loss is NaN at update 3"}'; exit 1"#, 10_000), |_| {}).await;
        assert_eq!(nan, ChildOutcome::Failed(ChildFailure::Reported("loss is NaN at update 3".into())));
        let t0 = std::time::Instant::now();
        let slow = run(&sh("sleep 30", 300), |_| {}).await;
        assert_eq!(slow, ChildOutcome::Failed(ChildFailure::Timeout(Duration::from_millis(300))));
        assert!(t0.elapsed() < Duration::from_secs(10), "the child was killed, not waited for");
        let none = run(&sh("exit 0", 10_000), |_| {}).await;
        assert_eq!(none, ChildOutcome::Failed(ChildFailure::NoModel));
        let missing = run(&ChildSpec { program: "/nonexistent/tradebot".into(), ..sh("", 1000) }, |_| {}).await;
        assert!(matches!(missing, ChildOutcome::Failed(ChildFailure::Spawn { .. })));
    }

    #[test]
    fn nvidia_smi_lines_are_read_per_pid() {
        let text = "4242, 1536\n99, 20\n4242, 512\n";
        assert_eq!(parse_compute_apps(text, 4242), Some(2048));
        assert_eq!(parse_compute_apps(text, 7), None);
        assert_eq!(parse_compute_apps("No running processes found\n", 7), None);
    }
}
