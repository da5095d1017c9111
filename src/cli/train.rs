//! `tradebot train ppo`: arguments, the JSON-lines protocol the retrainer reads (`retrain::child`), and
//! the progress display on a terminal. The training itself lives in `train_ppo` (feature `train`); a
//! build without it keeps the command and says why it cannot train.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct PpoArgs {
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// auto (CUDA when usable, else CPU) | cpu | cuda
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Environment steps to train for (default: retrain.ppo_steps, else 200000).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Continue from the latest checkpoint under state_dir/checkpoints/ppo.
    #[arg(long)]
    pub resume: bool,
    /// Train on a dataset snapshot (safetensors, written by the daemon's retrain) instead of the store.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// JSON lines on stdout: progress, then done (or error).
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "train")]
/// Environment steps when neither `--steps` nor `retrain.ppo_steps` says.
pub const DEFAULT_STEPS: u64 = 200_000;

/// Prints one JSON line on stdout (the child protocol), flushed at once so the parent sees it live.
pub fn emit(v: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

pub fn ppo(args: PpoArgs) -> anyhow::Result<ExitCode> {
    let json = args.json;
    let result = run_ppo(args);
    if json && let Err(e) = &result {
        let message = e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ");
        emit(&serde_json::json!({ "event": "error", "message": message }));
    }
    result
}

#[cfg(feature = "train")]
fn run_ppo(args: PpoArgs) -> anyhow::Result<ExitCode> {
    super::train_ppo::run(args)
}

#[cfg(not(feature = "train"))]
fn run_ppo(_: PpoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this tradebot was built without training (the `train` cargo feature, which links libtorch): rebuild with default features (`make build`) to train"
    )
}

#[cfg(feature = "train")]
/// Formats seconds as `1h02m`, `3m05s` or `42s`.
pub fn eta(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(all(test, feature = "train"))]
mod tests {
    #[test]
    fn eta_reads_well() {
        assert_eq!(super::eta(42.4), "42s");
        assert_eq!(super::eta(185.0), "3m05s");
        assert_eq!(super::eta(3720.0), "1h02m");
        assert_eq!(super::eta(-3.0), "0s");
    }
}
