//! The kill switch across `store restore`. A backup holds the switch as it was when taken; the database
//! it replaces may say otherwise (tripped since, or cleared since). A tripped switch always wins: the
//! restored store keeps whichever one is tripped (the replaced database's when both are, as the newer),
//! so a restore never silently clears it; `tradebot risk clear` does that, on purpose. Every difference
//! is said (a WARN, and `restore`'s output).

use super::scratch::Scratch;
use super::{DB_DIR, StoreError, TreeName, check, guard, leftovers, open_db};
use std::path::Path;

/// The risk module's key of the tripped kill switch in the `kv` tree (`risk::kill::KILL_SWITCH_KEY`;
/// the store sits below `risk` and cannot name it).
pub(super) const KILL_SWITCH_KEY: &[u8] = b"risk.kill_switch";

/// The stored kill switch: its raw record when tripped.
pub(super) type Kill = Option<Vec<u8>>;

/// Why the replaced database's kill switch could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unreadable {
    #[error("cannot make a private copy: {0}")]
    Scratch(StoreError),
    #[error("cannot copy it: {0}")]
    Copy(std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The kill switch of the database under `state_dir`, read from a private copy (the database may be
/// damaged: that is often why it is replaced; sled's recovery must not change it). `Err`: unreadable.
pub(super) fn read_current(state_dir: &Path) -> Result<Kill, Unreadable> {
    let src = state_dir.join(DB_DIR);
    if !src.is_dir() {
        return Ok(None);
    }
    let scratch = Scratch::new(state_dir).map_err(Unreadable::Scratch)?;
    let copy = scratch.path().join(DB_DIR);
    check::copy_dir(&src, &copy).map_err(Unreadable::Copy)?;
    leftovers::clear_db(&copy);
    let r = guard::guarded(state_dir, || {
        let db = open_db(&copy)?;
        Ok(db.open_tree(TreeName::Kv.as_str())?.get(KILL_SWITCH_KEY)?.map(|v| v.to_vec()))
    });
    r.map_err(|e: StoreError| Unreadable::Store(e))
}

/// The kill switch in the backup's trees.
pub(super) fn in_backup(trees: &super::Trees) -> Kill {
    let kv = trees.iter().find(|(name, _)| name.as_slice() == TreeName::Kv.as_str().as_bytes())?;
    kv.1.iter().find(|(k, _)| k.as_slice() == KILL_SWITCH_KEY).map(|(_, v)| v.clone())
}

/// Decides the restored store's kill switch from the backup's and the replaced database's; returns the
/// record to write over the backup's (if any) and the sentence that says what happened (`None`: both agree).
pub(super) fn decide(backup: &Kill, replaced: &Result<Kill, Unreadable>) -> (Option<Vec<u8>>, Option<String>) {
    let replaced = match replaced {
        Ok(k) => k,
        Err(why) => {
            let kept = match backup {
                Some(b) => format!("the backup's, {}, is kept", describe(b)),
                None => "the backup's is clear".to_string(),
            };
            return (
                None,
                Some(format!(
                    "the replaced database's kill switch could not be read ({why}); {kept}: check it with \
                     `tradebot risk status`"
                )),
            );
        }
    };
    match (backup, replaced) {
        (None, None) => (None, None),
        (Some(b), Some(r)) if b == r => (None, None),
        (None, Some(r)) => (
            Some(r.clone()),
            Some(format!(
                "the backup's kill switch is clear; the replaced database's was {}: it is kept tripped \
                 (`tradebot risk clear` clears it)",
                describe(r)
            )),
        ),
        (Some(b), Some(r)) => (
            Some(r.clone()),
            Some(format!(
                "the backup's kill switch was {}; the replaced database's was {}: the newer (the replaced \
                 database's) is kept",
                describe(b),
                describe(r)
            )),
        ),
        (Some(b), None) => (
            None,
            Some(format!(
                "the backup's kill switch was {}; the replaced database's was clear: it is kept tripped, as \
                 in the backup (`tradebot risk clear` clears it)",
                describe(b)
            )),
        ),
    }
}

/// "tripped at 2026-01-02T15:00:00Z (daily loss 3% over the limit)", from the stored JSON.
fn describe(record: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(record).unwrap_or_default();
    let at = v.get("tripped_at").and_then(|x| x.as_str()).unwrap_or("an unknown time");
    let reason = v.get("reason").and_then(|x| x.as_str()).unwrap_or("no reason recorded");
    format!("tripped at {at} ({reason})")
}
