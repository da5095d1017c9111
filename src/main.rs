//! The `tradebot` binary: parse arguments, run the command, print the error chain. Everything else lives
//! in the library.

use clap::Parser;
use std::process::ExitCode;
use tradebot::cli::{Cli, run};
use tradebot::config::{ConfigError, EX_CONFIG};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if let Some(ce) = e.downcast_ref::<ConfigError>() {
                eprintln!("{ce}");
                return ExitCode::from(EX_CONFIG);
            }
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
