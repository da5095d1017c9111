//! PPO checkpoints under `state_dir/checkpoints/ppo/update-NNNNNNNN/`: `weights.safetensors` (networks,
//! log-std and the observation statistics, all `VarStore` variables) and `meta.json` (update counter,
//! env steps, the run's planned updates). Each is written to a temporary directory and renamed into
//! place, so a crash leaves either a whole checkpoint or none; only the newest `KEEP` are kept. Adam's
//! moments live in the `VarStore` (`optim::Adam`), so they are saved and restored with the weights.

use crate::rl::ppo::Ppo;
use anyhow::Context;
use std::path::{Path, PathBuf};

pub(crate) const WEIGHTS: &str = "weights.safetensors";
const META: &str = "meta.json";
const KEEP: usize = 2;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckpointMeta {
    pub updates: u64,
    pub env_steps: u64,
    pub total_updates: u64,
}

fn dirs(root: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading checkpoints in {}", root.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("reading checkpoints in {}", root.display()))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(n) = name.strip_prefix("update-").and_then(|n| n.parse::<u64>().ok()) {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Writes a checkpoint of `p` and prunes older ones.
pub(crate) fn save(root: &Path, p: &Ppo, total_updates: u64) -> anyhow::Result<()> {
    let ctx = || format!("writing a checkpoint in {}", root.display());
    std::fs::create_dir_all(root).with_context(ctx)?;
    let meta = checkpoint_meta(p, total_updates);
    let dir = root.join(format!("update-{:08}", meta.updates));
    let tmp = root.join(format!(".tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(ctx)?;
    p.save_weights(&tmp.join(WEIGHTS)).with_context(ctx)?;
    std::fs::write(tmp.join(META), serde_json::to_vec_pretty(&meta)?).with_context(ctx)?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).with_context(ctx)?;
    let all = dirs(root)?;
    for (_, old) in all.iter().take(all.len().saturating_sub(KEEP)) {
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(())
}

/// The newest readable checkpoint: its directory and meta.
pub(crate) fn latest(root: &Path) -> anyhow::Result<Option<(PathBuf, CheckpointMeta)>> {
    for (_, dir) in dirs(root)?.into_iter().rev() {
        let Ok(text) = std::fs::read(dir.join(META)) else { continue };
        match serde_json::from_slice::<CheckpointMeta>(&text) {
            Ok(m) if dir.join(WEIGHTS).is_file() => return Ok(Some((dir, m))),
            _ => log::warn!("skipping unreadable checkpoint {}", dir.display()),
        }
    }
    Ok(None)
}

/// What a checkpoint records besides the weights.
pub(crate) fn checkpoint_meta(p: &Ppo, total_updates: u64) -> CheckpointMeta {
    CheckpointMeta { updates: p.updates, env_steps: p.env_steps, total_updates }
}
