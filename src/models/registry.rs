//! The registry: one directory per model version (`<root>/<id>/model.onnx` and `manifest.json`), and a
//! `history.jsonl` of every promotion and rollback. Writes are atomic (a temporary file or directory
//! renamed into place), and every load checks the ONNX file against the manifest's SHA-256, so a
//! truncated or corrupted model is refused by name instead of being run. A policy may keep its training
//! state beside it (`state`: `<id>/policy.safetensors`, named with its hash in the manifest).

use super::manifest::{Manifest, ModelKind, ModelState};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The ONNX graph's file name in a model's directory.
pub const ONNX_FILE: &str = "model.onnx";
/// The manifest's file name in a model's directory.
pub const MANIFEST_FILE: &str = "manifest.json";
const HISTORY_FILE: &str = "history.jsonl";

/// Why the registry could not read, write, promote or roll back a model.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A file or directory of the registry could not be read or written.
    #[error("model registry {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// No model directory of that id exists.
    #[error("model {id}: no such model in {root} (see `tradebot models list`)")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The registry's root directory.
        root: String,
    },
    /// The manifest could not be parsed (or written as JSON).
    #[error("model {id}: manifest {path} is unreadable: {reason}")]
    BadManifest {
        /// The model's id (its directory's name).
        id: String,
        /// The manifest file.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// A file's SHA-256 differs from the one its manifest records: it was truncated or altered.
    #[error(
        "model {id}: {path} does not match its manifest (SHA-256 {found}, expected {expected}); the file is corrupt: remove the model directory or restore it"
    )]
    Corrupt {
        /// The model's id.
        id: String,
        /// The file that failed the check.
        path: String,
        /// The file's SHA-256, in hex.
        found: String,
        /// The SHA-256 the manifest records, in hex.
        expected: String,
    },
    /// A rollback found no earlier champion of the kind in the history.
    #[error("no earlier {kind} champion to roll back to")]
    NoRollback {
        /// The model kind (`ppo` or `lstm`).
        kind: &'static str,
    },
}

/// One promotion or rollback, as recorded in `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When it happened, in UTC.
    pub at: DateTime<Utc>,
    /// The kind whose champion changed.
    pub kind: ModelKind,
    /// `promote` or `rollback`.
    pub action: String,
    /// The id of the model crowned champion.
    pub promoted: String,
    /// The id of the champion it replaced; `None` when there was none (or it was the same model).
    pub demoted: Option<String>,
    /// Why, as given by the gate's verdict or the person who asked.
    pub reason: String,
}

/// The model registry on disk (`<state_dir>/models`); cheap to clone (a path).
#[derive(Debug, Clone)]
pub struct Registry {
    root: PathBuf,
}

/// The SHA-256 of `bytes` in lower-case hex: the manifest's `onnx_sha256` and the model id's source.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RegistryError + '_ {
    move |source| RegistryError::Io { path: path.display().to_string(), source }
}

/// Writes `bytes` to `path` through a temporary file and a rename, each on disk before it returns (the
/// file's data, then the directory entry).
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
    }
    Ok(())
}

impl Registry {
    /// The registry at `root`, creating the directory if it is missing.
    pub fn open(root: &Path) -> Result<Registry, RegistryError> {
        std::fs::create_dir_all(root).map_err(io(root))?;
        Ok(Registry { root: root.to_path_buf() })
    }

    /// The registry at `root` for reading only: nothing is created (a missing directory lists no models).
    pub fn open_read_only(root: &Path) -> Registry {
        Registry { root: root.to_path_buf() }
    }

    /// The directory that holds one subdirectory per model version.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(super) fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// Adds a model as a candidate. `draft`'s id, hash and state are filled in here. Adding the same
    /// bytes twice returns the existing manifest.
    pub fn add(&self, onnx: &[u8], draft: Manifest) -> Result<Manifest, RegistryError> {
        self.add_files(onnx, draft, &[])
    }

    /// `add`, with more files written into the model's directory (`(name, bytes)`) in the same rename.
    pub(super) fn add_files(
        &self,
        onnx: &[u8],
        mut draft: Manifest,
        extra: &[(&str, &[u8])],
    ) -> Result<Manifest, RegistryError> {
        let sha = sha256_hex(onnx);
        // A policy's id names its algorithm (`ppo-…`, `sac-…`); the LSTM's its kind.
        let prefix = if draft.kind == ModelKind::Ppo { draft.algorithm.as_str() } else { draft.kind.as_str() };
        draft.id = format!("{prefix}-{}", &sha[..16]);
        draft.onnx_sha256 = sha;
        draft.state = ModelState::Candidate;
        let dir = self.dir(&draft.id);
        if dir.join(MANIFEST_FILE).is_file() {
            return self.get(&draft.id);
        }
        let tmp = self.root.join(format!(".tmp-{}-{}", draft.id, std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        std::fs::write(tmp.join(ONNX_FILE), onnx).map_err(io(&tmp))?;
        for (name, bytes) in extra {
            std::fs::write(tmp.join(name), bytes).map_err(io(&tmp))?;
        }
        let text = serde_json::to_vec_pretty(&draft).map_err(|e| RegistryError::BadManifest {
            id: draft.id.clone(),
            path: tmp.display().to_string(),
            reason: e.to_string(),
        })?;
        std::fs::write(tmp.join(MANIFEST_FILE), text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &dir).map_err(io(&dir))?;
        Ok(draft)
    }

    /// The manifest of one model (the ONNX file is not read).
    pub fn get(&self, id: &str) -> Result<Manifest, RegistryError> {
        let path = self.dir(id).join(MANIFEST_FILE);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(RegistryError::NotFound { id: id.to_string(), root: self.root.display().to_string() });
            }
            Err(e) => return Err(io(&path)(e)),
        };
        serde_json::from_slice(&text).map_err(|e| RegistryError::BadManifest {
            id: id.to_string(),
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// The manifest and the ONNX bytes, verified against the manifest's hash.
    pub fn load(&self, id: &str) -> Result<(Manifest, Vec<u8>), RegistryError> {
        let m = self.get(id)?;
        let path = self.dir(id).join(ONNX_FILE);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let found = sha256_hex(&bytes);
        if found != m.onnx_sha256 {
            return Err(RegistryError::Corrupt {
                id: id.to_string(),
                path: path.display().to_string(),
                found,
                expected: m.onnx_sha256,
            });
        }
        Ok((m, bytes))
    }

    /// Every readable model, oldest first, and the errors of the unreadable ones.
    pub fn list(&self) -> Result<(Vec<Manifest>, Vec<RegistryError>), RegistryError> {
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((ok, bad)),
            Err(e) => return Err(io(&self.root)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io(&self.root))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || !entry.path().is_dir() {
                continue;
            }
            match self.get(&name) {
                Ok(m) => ok.push(m),
                Err(e) => bad.push(e),
            }
        }
        ok.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok((ok, bad))
    }

    /// The model trained last (the newest `created_at`), of `kind` when given, whatever its state.
    pub fn latest(&self, kind: Option<ModelKind>) -> Result<Option<Manifest>, RegistryError> {
        Ok(self.list()?.0.into_iter().rfind(|m| kind.is_none_or(|k| m.kind == k)))
    }

    /// The champion of `kind`. Two champions (a crash between crowning the new one and retiring the old):
    /// the one the history names last as promoted, else the newest; the next promotion retires the other.
    pub fn champion(&self, kind: ModelKind) -> Result<Option<Manifest>, RegistryError> {
        let mut champs: Vec<Manifest> =
            self.list()?.0.into_iter().filter(|m| m.kind == kind && m.state == ModelState::Champion).collect();
        if champs.len() <= 1 {
            return Ok(champs.pop());
        }
        let history = self.history()?;
        let named = history.iter().rev().find_map(|e| champs.iter().position(|m| m.id == e.promoted));
        let pick =
            named.unwrap_or_else(|| champs.iter().enumerate().max_by_key(|(_, m)| m.created_at).map_or(0, |(i, _)| i));
        Ok(Some(champs.swap_remove(pick)))
    }

    fn set_state(&self, m: &mut Manifest, state: ModelState) -> Result<(), RegistryError> {
        m.state = state;
        self.rewrite_manifest(m)
    }

    /// Writes `m` over its model's manifest (atomically).
    pub(super) fn rewrite_manifest(&self, m: &Manifest) -> Result<(), RegistryError> {
        let path = self.dir(&m.id).join(MANIFEST_FILE);
        let text = serde_json::to_vec_pretty(m).map_err(|e| RegistryError::BadManifest {
            id: m.id.clone(),
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        write_atomic(&path, &text)
    }

    fn record(&self, e: &HistoryEntry) -> Result<(), RegistryError> {
        use std::io::Write;
        let path = self.root.join(HISTORY_FILE);
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(io(&path))?;
        let line = serde_json::to_string(e).unwrap_or_default();
        writeln!(f, "{line}").and_then(|_| f.sync_all()).map_err(io(&path))
    }

    /// Every promotion and rollback, oldest first; none when the history file does not exist yet. A line
    /// that does not parse is skipped.
    pub fn history(&self) -> Result<Vec<HistoryEntry>, RegistryError> {
        let path = self.root.join(HISTORY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Crowns `id` first (on disk), then retires every other champion of its kind, then records it: a
    /// crash in between leaves two champions (resolved by `champion`), never none.
    fn switch(&self, id: &str, action: &str, reason: &str) -> Result<Manifest, RegistryError> {
        let (mut new, _) = self.load(id)?;
        let old = self.champion(new.kind)?;
        self.set_state(&mut new, ModelState::Champion)?;
        let others: Vec<Manifest> = self
            .list()?
            .0
            .into_iter()
            .filter(|m| m.kind == new.kind && m.state == ModelState::Champion && m.id != new.id)
            .collect();
        for mut o in others {
            self.set_state(&mut o, ModelState::Retired)?;
        }
        self.record(&HistoryEntry {
            at: crate::clock::now(),
            kind: new.kind,
            action: action.into(),
            promoted: new.id.clone(),
            demoted: old.map(|o| o.id).filter(|o| o != id),
            reason: reason.into(),
        })?;
        Ok(new)
    }

    /// Makes `id` the champion of its kind; the previous champion is retired. The ONNX file is verified.
    pub fn promote(&self, id: &str, reason: &str) -> Result<Manifest, RegistryError> {
        self.switch(id, "promote", reason)
    }

    /// Puts back the champion that the current one replaced. Rollbacks walk back through the champion
    /// history: after A, B, C were crowned, a rollback crowns B and a second one A (not C again).
    pub fn rollback(&self, kind: ModelKind, reason: &str) -> Result<Manifest, RegistryError> {
        let current = self.champion(kind)?.map(|m| m.id);
        let mut line = champion_line(&self.history()?, kind);
        // A champion crowned outside the history (by hand on disk) replaced the line's last one.
        if current.is_some() && line.last() != current.as_ref() {
            line.extend(current);
        }
        line.pop();
        let previous = line.pop().ok_or(RegistryError::NoRollback { kind: kind.as_str() })?;
        self.switch(&previous, "rollback", reason)
    }
}

/// The champions of `kind` still in line, oldest first, as the history leaves them: a promotion adds its
/// model, a rollback goes back to the model it crowned (dropping the ones crowned after it).
fn champion_line(history: &[HistoryEntry], kind: ModelKind) -> Vec<String> {
    let mut line: Vec<String> = Vec::new();
    for e in history.iter().filter(|e| e.kind == kind) {
        if e.action == "rollback"
            && let Some(i) = line.iter().rposition(|id| *id == e.promoted)
        {
            line.truncate(i + 1);
            continue;
        }
        if e.demoted.is_some() && line.is_empty() {
            line.extend(e.demoted.clone());
        }
        if line.last() != Some(&e.promoted) {
            line.push(e.promoted.clone());
        }
    }
    line
}
