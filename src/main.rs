//! The `tradebot` binary: parse arguments, run the command, print the error chain. Everything else lives
//! in the library.

use clap::Parser;
use std::process::ExitCode;
use tradebot::alpaca::rest::RestError;
use tradebot::cli::{Cli, run};
use tradebot::config::{ConfigError, EX_CONFIG};
use tradebot::daemon::{EX_CANTCREAT, StateDirError};
use tradebot::live::{EX_FATAL, EX_PANIC, RunError};
use tradebot::store::{EX_DISK_FULL, EX_STORE, StoreError};

/// jemalloc for the whole process (libtorch and ONNX Runtime included, through its unprefixed `malloc`):
/// training commands tell it to keep freed pages (`tradebot::alloc::keep_freed_pages`, from `cli::run`).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // The reader went away (`tradebot status | head -1`): nothing is wrong, nothing to say.
            let broken_pipe = |c: &(dyn std::error::Error + 'static)| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            };
            if e.chain().any(broken_pipe) {
                return ExitCode::SUCCESS;
            }
            if let Some(ce) = e.downcast_ref::<ConfigError>() {
                eprintln!("{ce}");
                return ExitCode::from(EX_CONFIG);
            }
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            // A damaged or rolled-back store: EX_DATAERR, which the unit does not restart into.
            if e.chain().filter_map(|c| c.downcast_ref::<StoreError>()).any(StoreError::is_damage) {
                return ExitCode::from(EX_STORE);
            }
            // Keys Alpaca refuses are a configuration a person must fix: EX_CONFIG, not restarted.
            if e.chain().any(|c| matches!(c.downcast_ref::<RestError>(), Some(RestError::Auth { .. }))) {
                return ExitCode::from(EX_CONFIG);
            }
            // A state directory that cannot be created or written: EX_CANTCREAT, not restarted.
            if e.chain().any(|c| c.downcast_ref::<StateDirError>().is_some()) {
                return ExitCode::from(EX_CANTCREAT);
            }
            if e.chain().filter_map(|c| c.downcast_ref::<StoreError>()).any(StoreError::is_disk_full) {
                return ExitCode::from(EX_DISK_FULL);
            }
            // A fatal stream error (EX_TEMPFAIL) or a panicked core (EX_SOFTWARE): systemd restarts us.
            match e.chain().find_map(|c| c.downcast_ref::<RunError>()) {
                Some(RunError::Fatal(_)) => ExitCode::from(EX_FATAL),
                Some(RunError::CorePanicked) => ExitCode::from(EX_PANIC),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
