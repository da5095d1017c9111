//! Seeding a registry from shipped models: the repository's `models/` directory holds default models in
//! the registry's own layout (`<id>/model.onnx`, `<id>/manifest.json`, and a policy's training state
//! `<id>/policy.safetensors` where its manifest names one). `Registry::seed_from` imports
//! those the registry lacks, verifying each file's hash and id, and makes one champion for every kind
//! that has none, so a fresh state directory trades with the shipped defaults.

use super::manifest::{Manifest, ModelKind, ModelState};
use super::registry::{MANIFEST_FILE, ONNX_FILE, Registry, RegistryError, sha256_hex};
use std::path::Path;

/// Why a shipped model does not fit the configuration (its features, symbols, timeframe or action
/// space): it is imported, not crowned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Misfit(pub String);

impl From<&str> for Misfit {
    fn from(why: &str) -> Misfit {
        Misfit(why.to_string())
    }
}

/// What `seed_from` did.
#[derive(Debug, Default)]
pub struct SeedReport {
    /// Ids imported into the registry.
    pub imported: Vec<String>,
    /// Ids made champion of their kind (the kind had none).
    pub champions: Vec<String>,
    /// Shipped models refused (unreadable manifest, hash or id mismatch), with the reason.
    pub refused: Vec<RegistryError>,
    /// Shipped models imported but not made champion because they do not fit the configuration
    /// (symbols, timeframe, features), with why.
    pub not_applicable: Vec<(String, String)>,
}

fn read_shipped(dir: &Path, name: &str) -> Result<(Manifest, Vec<u8>), RegistryError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| RegistryError::Io { path, source }
    };
    let mpath = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&mpath).map_err(io(&mpath))?;
    let m: Manifest = serde_json::from_slice(&text).map_err(|e| RegistryError::BadManifest {
        id: name.to_string(),
        path: mpath.display().to_string(),
        reason: e.to_string(),
    })?;
    let opath = dir.join(ONNX_FILE);
    let bytes = std::fs::read(&opath).map_err(io(&opath))?;
    let found = sha256_hex(&bytes);
    let want_id = format!("{}-{}", m.kind.as_str(), &found[..16]);
    if found != m.onnx_sha256 || m.id != want_id || name != m.id {
        return Err(RegistryError::Corrupt {
            id: name.to_string(),
            path: opath.display().to_string(),
            found,
            expected: m.onnx_sha256,
        });
    }
    Ok((m, bytes))
}

impl Registry {
    /// Imports the models under `dir` that the registry lacks and makes a champion for each kind without
    /// one: the shipped model marked champion, else the newest shipped one of that kind. A missing `dir`
    /// seeds nothing. A bad shipped model is refused (and reported), never imported.
    pub fn seed_from(&self, dir: &Path) -> Result<SeedReport, RegistryError> {
        self.seed_fitting(dir, &|_| Ok(()))
    }

    /// `seed_from`, crowning only shipped models that `fit` accepts (the configuration's symbols,
    /// timeframe and features); the others are imported as not applicable, each with the reason.
    pub fn seed_fitting(
        &self,
        dir: &Path,
        fit: &dyn Fn(&Manifest) -> Result<(), Misfit>,
    ) -> Result<SeedReport, RegistryError> {
        let mut report = SeedReport::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
            Err(source) => return Err(RegistryError::Io { path: dir.display().to_string(), source }),
        };
        let mut shipped = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| RegistryError::Io { path: dir.display().to_string(), source })?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || !entry.path().is_dir() {
                continue;
            }
            match read_shipped(&entry.path(), &name) {
                Ok(m) => shipped.push(m),
                Err(e) => {
                    log::warn!("shipped model refused: {e}");
                    report.refused.push(e);
                }
            }
        }
        shipped.sort_by(|a, b| a.0.created_at.cmp(&b.0.created_at).then_with(|| a.0.id.cmp(&b.0.id)));
        for (m, bytes) in &shipped {
            if matches!(self.get(&m.id), Err(RegistryError::NotFound { .. })) {
                let state = super::state::shipped_state(&dir.join(&m.id), m);
                self.add_with_state(bytes, m.clone(), state.as_deref())?;
                report.imported.push(m.id.clone());
            }
        }
        let history = self.history()?;
        for kind in [ModelKind::Ppo, ModelKind::Lstm] {
            if self.champion(kind)?.is_some() {
                continue;
            }
            // A registry that has had champions of this kind and has none now was left so by someone or
            // something: a shipped default is not crowned over that history behind the user's back.
            if history.iter().any(|e| e.kind == kind) {
                log::warn!(
                    "models: no {} champion, but the registry has a history of them: none seeded; promote one with `tradebot models promote ID`",
                    kind.as_str()
                );
                continue;
            }
            let mut of_kind: Vec<&Manifest> = Vec::new();
            for m in shipped.iter().map(|(m, _)| m).filter(|m| m.kind == kind) {
                match fit(m) {
                    Ok(()) => of_kind.push(m),
                    Err(why) => report.not_applicable.push((m.id.clone(), why.to_string())),
                }
            }
            let pick = of_kind.iter().rev().find(|m| m.state == ModelState::Champion).or(of_kind.last());
            if let Some(m) = pick {
                self.promote(&m.id, "seeded from the shipped default models")?;
                report.champions.push(m.id.clone());
            }
        }
        Ok(report)
    }
}
