//! The `tradebot` binary: parse arguments, run the command, print the error chain. Everything else lives
//! in the library.

use clap::Parser;
use std::io::Write as _;
use std::process::ExitCode;
use tradebot::alpaca::rest::RestError;
use tradebot::cli::{Cli, run};
use tradebot::store::{EX_DISK_FULL, EX_STORE, StoreError};
use tradebot::{ConfigError, EX_CONFIG};
use tradebot::{EX_CANTCREAT, StateDirError};
use tradebot::{EX_FATAL, EX_PANIC, RunError};
use tradebot::{EX_IOERR, OutError, err_fmt as err};

/// jemalloc for the whole process (libtorch and ONNX Runtime included, through its unprefixed `malloc`):
/// training commands tell it to keep freed pages (`tradebot::keep_freed_pages`, from `cli::run`).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

/// clap's own output (help, version, a usage error) as `clap::Error::exit` writes it, but a full stdout is
/// an error here, not silence.
fn clap_exit(e: &clap::Error) -> ExitCode {
    let to_stdout = !e.use_stderr();
    let written = e.print().and_then(|()| if to_stdout { std::io::stdout().flush() } else { Ok(()) });
    match written {
        Err(io) if to_stdout => fail(&anyhow::Error::new(OutError(io))),
        _ => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)),
    }
}

/// The error chain on stderr, and the exit code that says what kind of failure it was.
fn fail(e: &anyhow::Error) -> ExitCode {
    {
        {
            // The reader went away (`tradebot models list | head -1`): nothing is wrong, nothing to say; exit
            // 0, as `git log | head` and `status | head` do (the shell shows no error for the pipeline).
            let stdout_error = e.chain().find_map(|c| c.downcast_ref::<OutError>());
            if stdout_error.is_some_and(OutError::is_closed_pipe) {
                return ExitCode::SUCCESS;
            }
            if let Some(ce) = e.downcast_ref::<ConfigError>() {
                err(format_args!("{ce}\n"));
                return ExitCode::from(EX_CONFIG);
            }
            for line in tradebot::error_lines(e) {
                err(format_args!("{line}\n"));
            }
            // stdout refused the output (`> /dev/full`): EX_IOERR, the code of a full disk.
            if stdout_error.is_some() {
                return ExitCode::from(EX_IOERR);
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
