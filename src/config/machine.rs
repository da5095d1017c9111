//! What a configuration needs from the machine it runs on, checked by `tradebot config check` (parsing
//! alone checks the file): the replay's `feed.file` exists, and `state_dir` is (or can be made) a
//! directory this user can write.

use super::{Config, FeedKind};
use std::path::Path;

/// Each problem names the key, the value and the fix; empty when the machine fits.
pub(crate) fn machine_problems(c: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    if c.feed.kind == FeedKind::Replay
        && let Some(f) = &c.feed.file
        && !f.is_file()
    {
        problems.push(format!(
            "feed.file = {:?}: no such file (a relative path is taken from the directory tradebot starts in, {}); \
             point it at the bars to replay, or remove it when the store already holds them",
            f.display().to_string(),
            std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| "unknown".into())
        ));
    }
    if let Err(why) = writable(&c.state_dir) {
        problems.push(format!(
            "state_dir = {:?}: {why}; choose a directory this user can write (or create it: \
             `install -d -o $(id -un) DIR`)",
            c.state_dir.display().to_string()
        ));
    }
    problems
}

/// Why a state directory cannot be written.
#[derive(Debug, thiserror::Error)]
enum Unwritable {
    #[error("exists and is not a directory")]
    NotADirectory,
    #[error("not writable ({0})")]
    Denied(std::io::Error),
    #[error("does not exist, and its parent {} is {why}", parent.display())]
    Parent { parent: std::path::PathBuf, why: Box<Unwritable> },
}

/// Whether `dir` is a writable directory, or does not exist yet below a writable one.
fn writable(dir: &Path) -> Result<(), Unwritable> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(Unwritable::NotADirectory);
        }
        let probe = dir.join(format!(".tradebot-write-check-{}", std::process::id()));
        return match std::fs::write(&probe, b"") {
            Ok(()) => {
                let _ = std::fs::remove_file(&probe);
                Ok(())
            }
            Err(e) => Err(Unwritable::Denied(e)),
        };
    }
    let mut parent = dir.parent();
    while let Some(p) = parent {
        if p.as_os_str().is_empty() {
            return writable(Path::new("."));
        }
        if p.exists() {
            return writable(p).map_err(|why| Unwritable::Parent { parent: p.to_path_buf(), why: Box::new(why) });
        }
        parent = p.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn config(state_dir: &Path, file: &str) -> Config {
        let text = format!(
            "state_dir = {:?}\n[market]\nsymbols = [\"AAPL\"]\ntimeframe = \"1Day\"\n[feed]\nkind = \"replay\"\nfile = {file:?}\n",
            state_dir.display().to_string()
        );
        Config::parse(Path::new("t.toml"), &text).unwrap()
    }

    #[test]
    fn a_missing_feed_file_and_an_unwritable_state_dir_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("bars.csv");
        std::fs::write(&data, "x").unwrap();
        let ok = config(&dir.path().join("new/state"), data.to_str().unwrap());
        assert!(machine_problems(&ok).is_empty(), "{:?}", machine_problems(&ok));
        let missing = config(dir.path(), "no/such.csv");
        let p = machine_problems(&missing);
        assert!(p.len() == 1 && p[0].starts_with("feed.file = \"no/such.csv\": no such file"), "{p:?}");
        // A read-only directory (root can write anywhere: only checked when not root).
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
        let probe = std::fs::write(ro.join("x"), b"").is_err();
        if probe {
            let p = machine_problems(&config(&ro.join("state"), data.to_str().unwrap()));
            assert!(p.len() == 1 && p[0].contains("not writable"), "{p:?}");
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file_not_dir = config(&data, data.to_str().unwrap());
        assert!(machine_problems(&file_not_dir)[0].contains("not a directory"));
    }
}
