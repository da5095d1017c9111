//! `tradebot bench gpu`: the GPU figures in one command. Each measurement is another `tradebot bench ...
//! --json` run on `cuda` (the same binary, as a child), with NVML sampling the GPU while it runs: the
//! environment kernel's CUDA build at E ∈ {1024, 4096, 16384} × A = 30, PPO end to end with [256, 256] and
//! [2048, 1024, 512] at E = 4096, a search's 64 trials of [256, 256] trained as one population, and the LSTM's epoch over 490k samples at batch 3072. Prints a JSON line
//! per measurement and, with `--results FILE`, appends a table (device, command, result) to it. Without a
//! usable CUDA device it prints "no GPU" and exits 1. Then the Python peers run on the same GPU
//! ([`super::gpu_peers`]: Stable-Baselines3 with 32 `SubprocVecEnv` workers, the DataLoader LSTM loop), each
//! followed by the ratio of our figure to theirs.

use super::gpu_peers::SEARCH;
#[cfg(feature = "train")]
use crate::out::outln;
use std::process::ExitCode;

/// The arguments of `tradebot bench gpu`.
#[derive(Debug, Clone, clap::Args)]
pub struct GpuBench {
    /// Append the figures as a Markdown table to this file (benches/RESULTS.md).
    #[arg(long)]
    pub results: Option<std::path::PathBuf>,
    /// Fewer steps (a check that every measurement runs, not figures to report).
    #[arg(long)]
    pub quick: bool,
    /// One JSON object per measurement and line instead of text.
    #[arg(long)]
    pub json: bool,
    /// The Python that runs the peers (with PyTorch on CUDA).
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Wheels for the peers (`make gpu-kit`), installed beside them; without, `--python` must have them.
    #[arg(long)]
    pub wheelhouse: Option<std::path::PathBuf>,
    /// The peers' scripts.
    #[arg(long, default_value = "benches/peers")]
    pub peers: std::path::PathBuf,
    /// Our figures only.
    #[arg(long)]
    pub no_peers: bool,
}

/// Where our LSTM measurement writes its data for the PyTorch peer.
pub const LSTM_DATA: &str = "target/bench-gpu/lstm";

/// The measurements: a name and the `tradebot` arguments (each with `--json`).
pub fn plan(quick: bool) -> Vec<(String, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    // Full runs long enough that NVML's readings over their timed part mean something (10 to 20 of them).
    let (env_steps, ppo_updates, lstm_samples) = if quick { ("50", 1, "20000") } else { ("2000", 10, "490000") };
    let env_secs = if quick { "0" } else { "2" };
    let mut out = Vec::new();
    for e in ["1024", "4096", "16384"] {
        let args = s(&["bench", "env", "--device", "cuda", "--backend", "kernel", "--envs", e, "--assets", "30"]);
        let rest = s(&["--steps", env_steps, "--min-seconds", env_secs, "--json"]);
        out.push((format!("env kernel E={e} A=30"), [args, rest].concat()));
    }
    for (name, hidden) in [("[256, 256]", "256,256"), ("[2048, 1024, 512]", "2048,1024,512")] {
        let steps = (4096 * 32 * ppo_updates).to_string();
        let args = s(&["bench", "ppo", "--device", "cuda", "--envs", "4096", "--hidden", hidden, "--n-steps", "32"]);
        let mut rest = s(&["--batch-size", "16384", "--epochs", "4", "--steps", &steps, "--json"]);
        if hidden.starts_with("2048") {
            rest.push("--mixed-precision".into());
        }
        out.push((format!("PPO {name} E=4096"), [args, rest].concat()));
    }
    // Issue 21's GPU target: 64 trials of [256, 256] at once, as one population.
    let trial_steps = if quick { "8192" } else { "65536" };
    let args = s(&["bench", "tune", "--population", "--device", "cuda", "--trials", "64", "--envs", "64"]);
    let rest = s(&["--hidden", "256,256", "--n-steps", "64", "--batch-size", "1024", "--epochs", "4"]);
    out.push((SEARCH.to_string(), [args, rest, s(&["--steps", trial_steps, "--json"])].concat()));
    let args = s(&["bench", "lstm", "--device", "cuda", "--samples", lstm_samples, "--batch", "3072"]);
    let args = [args, s(&["--dump", LSTM_DATA, "--json"])].concat();
    out.push(("LSTM epoch, batch 3072".to_string(), args));
    out
}

/// Runs `tradebot bench gpu`: every GPU figure, then the peers (unless `--no-peers`); exit 1 without a GPU.
#[cfg(feature = "train")]
pub fn gpu(b: GpuBench) -> anyhow::Result<ExitCode> {
    use anyhow::{Context, bail};
    if !crate::runtime_libs::load_torch_cuda() {
        eprintln!("no GPU: tch::Cuda::is_available() is false (no NVIDIA driver, or no CUDA device); nothing measured");
        return Ok(ExitCode::from(1));
    }
    let exe = std::env::current_exe().context("finding this tradebot binary")?;
    let device = tch::Cuda::device_count();
    let mut rows = Vec::new();
    let show = |row: &serde_json::Value| {
        if b.json { outln!("{row}") } else { outln!("{}: {}", row["measure"].as_str().unwrap_or(""), describe(row)) }
    };
    for (name, args) in plan(b.quick) {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(&args);
        let row = measure(&name, &format!("tradebot {}", args.join(" ")), cmd, false)?;
        show(&row)?;
        rows.push(row);
    }
    if !b.no_peers {
        let ours = rows.clone();
        peers(&b, &ours, &mut |row| {
            show(&row)?;
            rows.push(row);
            Ok(())
        })?;
    }
    if let Some(path) = &b.results {
        append(path, device, &rows)?;
    }
    if rows.iter().any(|r| r["ok"] != true) {
        bail!("some GPU measurements failed (see their errors above)");
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one measurement with NVML sampling the GPU; its row (the last JSON line it printed as `result`).
/// With `echo`, each line the command writes to stderr is also written to ours as it comes, prefixed by
/// `name` (the peers say their phases there: a run stopped by a time limit still shows where it was).
#[cfg(feature = "train")]
fn measure(name: &str, command: &str, mut cmd: std::process::Command, echo: bool) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context;
    // The measured commands run on cuda:0 (their `--device cuda`), under this process's CUDA_VISIBLE_DEVICES.
    let sampler = crate::ml::gpu::GpuSampler::start(0, std::time::Duration::from_millis(100));
    if let Err(e) = &sampler {
        eprintln!("{name}: GPU busy % not sampled: {e}");
    }
    let out = if echo { output_echoing_stderr(name, cmd) } else { cmd.output() };
    let out = out.with_context(|| format!("running {name}"))?;
    let process = sampler.ok().map(crate::ml::gpu::GpuSampler::stop);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    // The measurement's own figures over its timed part (`bench::steady`) where it gives them; else the
    // whole process's, its start included.
    let timed = line.as_ref().and_then(|l| l.get("gpu")).filter(|g| g["samples"].as_u64().is_some_and(|n| n > 0));
    let gpu = match timed {
        Some(g) => g.clone(),
        None => serde_json::to_value(process)?,
    };
    // What ran, as the measurement itself says (`device`, `env`): a figure is never a CPU one under a GPU name.
    let ran = |k: &str| line.as_ref().and_then(|l| l.get(k)).cloned().unwrap_or(serde_json::Value::Null);
    Ok(serde_json::json!({
        "measure": name, "command": command, "ok": out.status.success(), "result": line, "gpu": gpu,
        "gpu_over": if timed.is_some() { "timed" } else { "process" }, "gpu_process": process,
        "device": ran("device"), "env": ran("env"),
        "error": (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).to_string()),
    }))
}

/// `cmd`'s output, its stderr also written line by line to ours (prefixed by `name`) as it comes.
#[cfg(feature = "train")]
fn output_echoing_stderr(name: &str, mut cmd: std::process::Command) -> std::io::Result<std::process::Output> {
    use std::io::{BufRead, Read};
    use std::process::Stdio;
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let err = child.stderr.take().map(|e| {
        let name = name.to_string();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            for line in std::io::BufReader::new(e).split(b'\n').map_while(Result::ok) {
                eprintln!("{name}: {}", String::from_utf8_lossy(&line));
                kept.extend_from_slice(&line);
                kept.push(b'\n');
            }
            kept
        })
    });
    let mut stdout = Vec::new();
    if let Some(mut out) = child.stdout.take()
        && let Err(e) = out.read_to_end(&mut stdout)
    {
        // Not left running nor unreaped behind the error.
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    let status = child.wait()?;
    let stderr = err.and_then(|t| t.join().ok()).unwrap_or_default();
    Ok(std::process::Output { status, stdout, stderr })
}

/// The peers' rows, each followed by the ratio of our figure to theirs, handed to `row` as each is known.
#[cfg(feature = "train")]
fn peers(
    b: &GpuBench,
    ours: &[serde_json::Value],
    row: &mut dyn FnMut(serde_json::Value) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use super::gpu_peers;
    let site = match &b.wheelhouse {
        Some(w) => Some(gpu_peers::install(&b.python, w)?),
        None => None,
    };
    let mut rows = Vec::new();
    for p in gpu_peers::plan(b.quick, std::path::Path::new(LSTM_DATA)) {
        let script = b.peers.join(p.script);
        let mut cmd = std::process::Command::new(&b.python);
        cmd.arg(&script).args(&p.args);
        if let Some(site) = &site {
            let path =
                std::env::var_os("PYTHONPATH").map(|old| format!(":{}", old.to_string_lossy())).unwrap_or_default();
            cmd.env("PYTHONPATH", format!("{}{path}", site.display()));
        }
        if let Some(w) = &b.wheelhouse {
            cmd.env("TRADEBOT_WHEELHOUSE", w);
        }
        let command = format!("{} {} {}", b.python, script.display(), p.args.join(" "));
        let peer = measure(&p.name, &command, cmd, true)?;
        let theirs = ours.iter().find(|r| r["measure"] == p.against.as_str());
        let ratio = theirs.and_then(|t| gpu_peers::ratio(t, &peer, p.figure));
        let ratio_row = serde_json::json!({
            "measure": format!("ratio: tradebot's {} / the peer's ({})", p.against, p.figure),
            "command": "-", "ok": ratio.is_some(), "result": {"ratio": ratio}, "gpu": null,
            "error": ratio.is_none().then_some("a row failed or lacks the figure"),
        });
        for r in [peer, ratio_row] {
            rows.push(r.clone());
            row(r)?;
        }
    }
    if let Some(r) = gpu_peers::search_ratio(ours, &rows) {
        row(r)?;
    }
    Ok(())
}

/// `tradebot bench gpu` in a build without the `train` feature: prints "no GPU" and exits 1.
#[cfg(not(feature = "train"))]
pub fn gpu(_: GpuBench) -> anyhow::Result<ExitCode> {
    eprintln!("no GPU: this tradebot was built without the `train` feature (libtorch, CUDA)");
    Ok(ExitCode::from(1))
}

/// The figure of a measurement's result line, for people.
pub fn describe(row: &serde_json::Value) -> String {
    let r = &row["result"];
    if let Some(x) = r.get("ratio").and_then(|v| v.as_f64()) {
        return format!("{x:.1}x");
    }
    let figure = ["asset_steps_per_s", "env_steps_per_s", "epoch_secs", "samples_per_sec", "trials_per_hour"]
        .iter()
        .filter_map(|k| r.get(*k).and_then(|v| v.as_f64()).map(|v| format!("{k} {v:.4e}")))
        .collect::<Vec<_>>()
        .join(", ");
    let busy = row["gpu"]["busy_mean_pct"].as_f64().map_or("busy n/a".into(), |b| format!("GPU busy {b:.0}%"));
    let ran = match (row["device"].as_str(), row["env"].as_str()) {
        (Some(d), Some(e)) => format!(" on {d} ({e} env)"),
        (Some(d), None) => format!(" on {d}"),
        _ => String::new(),
    };
    if row["ok"] == true { format!("{figure}{ran}; {busy}") } else { format!("failed: {}", row["error"]) }
}

#[cfg(feature = "train")]
fn append(path: &std::path::Path, devices: i64, rows: &[serde_json::Value]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    writeln!(f, "\n## GPU figures (`tradebot bench gpu`), {}\n", crate::clock::now().date_naive())?;
    writeln!(
        f,
        "CUDA devices: {devices}; GPU busy % sampled by NVML every 100 ms: over each of our measurements' timed part \
         (after its first update, round, epoch or 64 env steps), over the whole process for the peers.\n"
    )?;
    writeln!(
        f,
        "| measurement | device / env | command | result | GPU busy (mean / min) | memory max |\n| --- | --- | --- | --- | --- | --- |"
    )?;
    for r in rows {
        writeln!(
            f,
            "| {} | {} / {} | `{}` | {} | {} / {} % | {} MiB |",
            r["measure"].as_str().unwrap_or(""),
            r["device"].as_str().unwrap_or("-"),
            r["env"].as_str().unwrap_or("-"),
            r["command"].as_str().unwrap_or(""),
            describe(r),
            r["gpu"]["busy_mean_pct"].as_f64().map_or("-".into(), |v| format!("{v:.0}")),
            r["gpu"]["busy_min_pct"].as_f64().map_or("-".into(), |v| format!("{v:.0}")),
            r["gpu"]["memory_max_mb"].as_f64().map_or("-".into(), |v| format!("{v:.0}")),
        )?;
    }
    Ok(())
}

#[cfg(all(test, feature = "train"))]
mod tests {
    use super::*;

    #[test]
    fn a_row_says_the_device_and_env_the_measurement_ran_on() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", r#"echo '{"device":"cpu","env":"VecEnv","env_steps_per_s":5.0}'"#]);
        let row = measure("PPO", "tradebot bench ppo --device cuda", cmd, false).unwrap();
        assert_eq!((row["device"].as_str(), row["env"].as_str()), (Some("cpu"), Some("VecEnv")), "{row}");
        let text = describe(&row);
        assert!(text.contains("on cpu (VecEnv env)"), "a CPU figure is named as one: {text}");
    }

    /// A measurement that samples the GPU over its own timed part gives the row its figures; one that
    /// does not leaves the row with the whole process's (here none: no sampler runs without NVML).
    #[test]
    fn a_row_takes_the_gpu_figures_of_the_measurements_timed_part() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", r#"echo '{"device":"cuda:0","gpu":{"samples":12,"busy_mean_pct":93.5}}'"#]);
        let row = measure("PPO", "tradebot bench ppo --device cuda", cmd, false).unwrap();
        assert_eq!(row["gpu"]["busy_mean_pct"].as_f64(), Some(93.5), "{row}");
        assert_eq!(row["gpu_over"], "timed", "{row}");
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", r#"echo '{"device":"cuda:0","gpu":{"samples":0,"busy_mean_pct":0.0}}'"#]);
        let row = measure("PPO", "tradebot bench ppo --device cuda", cmd, false).unwrap();
        assert_eq!(row["gpu_over"], "process", "no samples are no figure: {row}");
        assert_eq!(row["gpu"], row["gpu_process"], "the whole process's figures, whatever NVML saw: {row}");
    }

    /// A peer's stderr is passed on as it comes and still kept: a failed peer's row says why, and its
    /// result line is read from its stdout alone.
    #[test]
    fn an_echoed_peer_keeps_its_stderr_for_the_row_and_its_result_from_stdout() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", r#"echo 'sb3_ppo: built 4 envs after 2.0 s' >&2; echo '{"env_steps_per_s":7.0}'; exit 3"#]);
        let row = measure("peer", "python3 sb3_ppo.py", cmd, true).unwrap();
        assert_eq!(row["ok"], false, "{row}");
        assert_eq!(row["result"]["env_steps_per_s"].as_f64(), Some(7.0), "{row}");
        let error = row["error"].as_str().unwrap_or("");
        assert!(error.contains("sb3_ppo: built 4 envs after 2.0 s"), "{row}");
    }
}
