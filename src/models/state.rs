//! A policy's training state, kept with it in the registry: `<id>/policy.safetensors` (the trainer's
//! networks, log-std and observation statistics at the end of its run; no optimizer state), named with its
//! SHA-256 in the manifest's `params.training_state`, so that a retrain can start from the champion
//! (`retrain.warm_start`) instead of from scratch. A missing or corrupt file is refused by name. The
//! model's id stays its ONNX file's: the state is beside the model, not part of what it is.

use super::manifest::Manifest;
use super::registry::{Registry, RegistryError, sha256_hex, write_atomic};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The training state's file in a model's directory.
pub const STATE_FILE: &str = "policy.safetensors";
/// The manifest's `params` key that names it.
pub const STATE_PARAM: &str = "training_state";

/// `params.training_state`: the file, its SHA-256 and its format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRef {
    /// The file's name in the model's directory (`STATE_FILE`).
    pub file: String,
    /// The file's SHA-256 in lower-case hex, checked at every load.
    pub sha256: String,
    /// `safetensors`: tensors by the trainer's variable names (`pi.…`, `vf.…`, `log_std`, `obs_norm.…`).
    pub format: String,
}

impl StateRef {
    fn of(bytes: &[u8]) -> StateRef {
        StateRef { file: STATE_FILE.into(), sha256: sha256_hex(bytes), format: "safetensors".into() }
    }

    /// The reference in `m`'s params: `None` without one, an error when it does not parse.
    pub fn in_manifest(m: &Manifest) -> Result<Option<StateRef>, StateError> {
        m.params
            .get(STATE_PARAM)
            .map(|v| serde_json::from_value(v.clone()))
            .transpose()
            .map_err(|e| StateError::BadRef { id: m.id.clone(), reason: e.to_string() })
    }
}

/// Why a model's training state could not be loaded for a warm start.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The model itself could not be loaded.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The manifest names no training state: the model can only be retrained from scratch.
    #[error(
        "model {id} has no training state: it was registered without {STATE_FILE} (trained before tradebot kept it, or brought as ONNX alone)"
    )]
    Absent {
        /// The model's id.
        id: String,
    },
    /// `params.training_state` is in the manifest but does not parse as a `StateRef`.
    #[error("model {id}: params.{STATE_PARAM} is unreadable: {reason}")]
    BadRef {
        /// The model's id.
        id: String,
        /// The parser's message.
        reason: String,
    },
    /// The manifest names a state file that is not on disk.
    #[error("model {id}: its training state {path} is missing: restore the file or retrain the model")]
    Missing {
        /// The model's id.
        id: String,
        /// The file expected.
        path: String,
    },
    /// The state file's SHA-256 differs from the manifest's: it was truncated or altered.
    #[error(
        "model {id}: its training state {path} does not match its manifest (SHA-256 {found}, expected {expected}): the file is corrupt; restore it or retrain the model"
    )]
    Corrupt {
        /// The model's id.
        id: String,
        /// The state file.
        path: String,
        /// The file's SHA-256, in hex.
        found: String,
        /// The SHA-256 the manifest records, in hex.
        expected: String,
    },
}

impl Registry {
    /// `add`, with the trainer's state at the end of its run (`state`, safetensors bytes) kept beside the
    /// model and named in its manifest. A model already registered without a state gets this one (the same
    /// ONNX trained again); one with a state keeps its own.
    pub fn add_with_state(
        &self,
        onnx: &[u8],
        mut draft: Manifest,
        state: Option<&[u8]>,
    ) -> Result<Manifest, RegistryError> {
        draft.params.remove(STATE_PARAM);
        let Some(bytes) = state else { return self.add(onnx, draft) };
        let sref = StateRef::of(bytes);
        let value = serde_json::to_value(&sref).unwrap_or_default();
        draft.params.insert(STATE_PARAM.into(), value.clone());
        let mut m = self.add_files(onnx, draft, &[(STATE_FILE, bytes)])?;
        if !m.params.contains_key(STATE_PARAM) {
            write_atomic(&self.dir(&m.id).join(STATE_FILE), bytes)?;
            m.params.insert(STATE_PARAM.into(), value);
            self.rewrite_manifest(&m)?;
        }
        Ok(m)
    }

    /// The model's training state: its manifest and the file's path, the file checked against the hash
    /// its manifest names.
    pub fn training_state(&self, id: &str) -> Result<(Manifest, PathBuf), StateError> {
        let m = self.get(id)?;
        let Some(sref) = StateRef::in_manifest(&m)? else { return Err(StateError::Absent { id: id.into() }) };
        if sref.file.contains(['/', '\\']) || sref.file.starts_with('.') {
            return Err(StateError::BadRef {
                id: id.into(),
                reason: format!("file {:?} is not a plain name", sref.file),
            });
        }
        let path = self.dir(id).join(&sref.file);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StateError::Missing { id: id.into(), path: path.display().to_string() });
            }
            Err(source) => return Err(RegistryError::Io { path: path.display().to_string(), source }.into()),
        };
        let found = sha256_hex(&bytes);
        if found != sref.sha256 {
            let path = path.display().to_string();
            return Err(StateError::Corrupt { id: id.into(), path, found, expected: sref.sha256 });
        }
        Ok((m, path))
    }
}

/// A shipped model's training state (`seed`): its bytes when its manifest names one and the file matches,
/// else `None` with a warning (the model is imported without it; a warm start from it then trains from
/// scratch and says why).
pub(super) fn shipped_state(dir: &std::path::Path, m: &Manifest) -> Option<Vec<u8>> {
    let sref = match StateRef::in_manifest(m) {
        Ok(Some(s)) => s,
        Ok(None) => return None,
        Err(e) => {
            log::warn!("shipped model {}: {e}; imported without its training state", m.id);
            return None;
        }
    };
    let path = dir.join(&sref.file);
    match std::fs::read(&path) {
        Ok(b) if sha256_hex(&b) == sref.sha256 && !sref.file.contains(['/', '\\']) => Some(b),
        Ok(_) => {
            log::warn!(
                "shipped model {}: its training state {} does not match its manifest's SHA-256; imported without it",
                m.id,
                path.display()
            );
            None
        }
        Err(e) => {
            log::warn!(
                "shipped model {}: cannot read its training state {}: {e}; imported without it",
                m.id,
                path.display()
            );
            None
        }
    }
}
