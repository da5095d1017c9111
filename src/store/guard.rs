//! sled panics on some damaged databases (`tried to serialize Uninitialized` while recovering a zeroed
//! log) instead of returning an error. Calls into sled that read a whole database (open, the scans of
//! `check`) run under `guarded`, which turns such a panic into `StoreError::Unreadable`; the panic
//! hook stays quiet for panics caught there, so the user sees one error, not a backtrace.

use super::StoreError;
use std::cell::Cell;
use std::path::Path;
use std::sync::Once;

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, a call into sled over the database at `dir`; a panic or a corruption error becomes
/// `StoreError::Unreadable`, other errors `StoreError::Db`.
pub(super) fn guarded<T>(dir: &Path, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    install_hook();
    let was = CATCHING.with(|c| c.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    match result {
        Ok(Err(StoreError::Db(sled::Error::Corruption { at, bt: _ }))) => Err(StoreError::Unreadable {
            dir: dir.to_path_buf(),
            detail: match at {
                Some(at) => format!("sled found a corrupt record at {at}"),
                None => "sled found a corrupt record".to_string(),
            },
        }),
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(StoreError::Unreadable { dir: dir.to_path_buf(), detail: format!("sled failed reading it: {msg}") })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_becomes_an_unreadable_store_error() {
        let dir = Path::new("/tmp/x");
        let err = guarded::<()>(dir, || panic!("tried to serialize Uninitialized")).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Unreadable { .. }), "{msg}");
        assert!(msg.contains("tried to serialize Uninitialized") && msg.contains("/tmp/x"), "{msg}");
        // Outside a guarded call the flag is off again.
        assert!(!CATCHING.with(Cell::get));
        assert_eq!(guarded(dir, || Ok(5)).unwrap(), 5);
    }
}
