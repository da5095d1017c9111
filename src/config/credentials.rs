//! Alpaca API keys: from the environment or systemd's `$CREDENTIALS_DIRECTORY`, never from the file.

use super::Secret;
use std::path::Path;

/// Alpaca API keys, read from the environment or from systemd credentials, never from the config file.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub key_id: Secret,
    pub secret_key: Secret,
    /// Where they came from, for logs ("environment" or the credentials directory).
    pub source: String,
}

pub(crate) const KEY_ID_VAR: &str = "APCA_API_KEY_ID";
pub(crate) const SECRET_KEY_VAR: &str = "APCA_API_SECRET_KEY";

/// Why the Alpaca keys could not be read: each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The environment holds one of the two keys.
    #[error("only one of {KEY_ID_VAR} and {SECRET_KEY_VAR} is set in the environment: set both")]
    HalfInEnvironment,
    /// The credentials directory holds one of the two keys (the directory).
    #[error("{0} holds only one of {KEY_ID_VAR} and {SECRET_KEY_VAR}: add the other with LoadCredential=")]
    HalfInDirectory(String),
    /// A credential file exists and cannot be read.
    #[error("cannot read credential {}: {error}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why (in the message: no source, so that it is said once).
        error: std::io::Error,
    },
}

impl Credentials {
    /// Looks for `APCA_API_KEY_ID` and `APCA_API_SECRET_KEY` in the environment, then as files of those
    /// names in `$CREDENTIALS_DIRECTORY` (systemd `LoadCredential=`). `Ok(None)` when neither has both.
    pub fn load() -> Result<Option<Credentials>, CredentialsError> {
        Self::load_from(|k| std::env::var(k).ok())
    }

    pub fn load_from(env: impl Fn(&str) -> Option<String>) -> Result<Option<Credentials>, CredentialsError> {
        let id = env(KEY_ID_VAR).filter(|s| !s.trim().is_empty());
        let secret = env(SECRET_KEY_VAR).filter(|s| !s.trim().is_empty());
        match (id, secret) {
            (Some(i), Some(s)) => {
                return Ok(Some(Credentials {
                    key_id: Secret::new(i.trim()),
                    secret_key: Secret::new(s.trim()),
                    source: "environment".into(),
                }));
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(CredentialsError::HalfInEnvironment);
            }
            (None, None) => {}
        }
        let Some(dir) = env("CREDENTIALS_DIRECTORY") else { return Ok(None) };
        let read = |name: &str| -> Result<Option<String>, CredentialsError> {
            let p = Path::new(&dir).join(name);
            match std::fs::read_to_string(&p) {
                Ok(s) => Ok(Some(s.trim().to_string())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(CredentialsError::Read { path: p, error }),
            }
        };
        match (read(KEY_ID_VAR)?, read(SECRET_KEY_VAR)?) {
            (Some(i), Some(s)) => {
                Ok(Some(Credentials { key_id: Secret::new(i), secret_key: Secret::new(s), source: dir }))
            }
            (None, None) => Ok(None),
            _ => Err(CredentialsError::HalfInDirectory(dir)),
        }
    }
}
