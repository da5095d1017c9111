//! Every command's output on stdout, in one place, so that no command can panic on it (`println!` does
//! when the write fails). `out!` and `outln!` write and flush, and return `Err(OutError)` when stdout
//! refuses the bytes: the command returns it with `?`, and `main` ends quietly with exit 0 when the reader
//! went away (`tradebot models list | head -1`: a closed pipe is not a failure, as for `status`), and
//! reports "cannot write to stdout" with the cause and exit `EX_IOERR` (74) for anything else (a full
//! disk, `> /dev/full`). `errln!` writes to stderr and ignores a failed write: nothing is left to tell it to.

use std::fmt;
use std::io::{self, Write};

/// The exit code for output that could not be written (`EX_IOERR`), the full disk's code.
pub const EX_IOERR: u8 = 74;

/// A write to stdout failed; the cause is its `source` (an `io::Error`).
#[derive(Debug)]
pub struct OutError(pub io::Error);

impl OutError {
    /// The reader closed the pipe (`| head -1`): the command ends quietly.
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

impl fmt::Display for OutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.kind() == io::ErrorKind::StorageFull {
            f.write_str("cannot write to stdout: the disk (or device) it goes to is full")
        } else {
            f.write_str("cannot write to stdout")
        }
    }
}

impl std::error::Error for OutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Writes `args` to stdout and flushes (what `out!` and `outln!` call).
pub(crate) fn write_fmt(args: fmt::Arguments<'_>) -> Result<(), OutError> {
    let mut o = io::stdout().lock();
    o.write_fmt(args).and_then(|()| o.flush()).map_err(OutError)
}

/// Writes `args` to stderr; a failed write is dropped (what `errln!` calls).
pub fn err_fmt(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// An error and its causes as `main` prints them: the error, then each cause that says something the
/// lines before it did not (an `io::Error` wrapped as "cannot read FILE: No such file…" is not repeated
/// as its own cause).
pub fn error_lines(e: &anyhow::Error) -> Vec<String> {
    let mut lines = vec![format!("error: {e}")];
    let mut said = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if text.is_empty() || said.contains(&text) {
            continue;
        }
        lines.push(format!("  caused by: {text}"));
        said.push('\n');
        said.push_str(&text);
    }
    lines
}

/// `print!` that returns `Result<(), OutError>` instead of panicking.
macro_rules! out {
    ($($t:tt)*) => {
        $crate::out::write_fmt(format_args!($($t)*))
    };
}

/// `println!` that returns `Result<(), OutError>` instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::write_fmt(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::out::write_fmt(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `eprint!` that never panics (a closed stderr loses the text).
macro_rules! err {
    ($($t:tt)*) => {
        $crate::out::err_fmt(format_args!($($t)*))
    };
}

/// `eprintln!` that never panics (a closed stderr loses the line).
macro_rules! errln {
    () => {
        $crate::out::err_fmt(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::out::err_fmt(format_args!("{}\n", format_args!($($t)*)))
    };
}

pub(crate) use {err, errln, out, outln};

#[cfg(test)]
mod tests {
    /// A cause already in the message is not printed again (`data import /nonexistent.csv` said the OS
    /// error twice); a cause that adds something is.
    #[test]
    fn a_cause_the_message_already_says_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let wrapped = anyhow::Error::new(io)
            .context(format!("cannot read /nonexistent.csv: {}", std::io::Error::from(std::io::ErrorKind::NotFound)));
        let lines = super::error_lines(&wrapped);
        assert_eq!(
            lines,
            vec![format!(
                "error: cannot read /nonexistent.csv: {}",
                std::io::Error::from(std::io::ErrorKind::NotFound)
            )]
        );
        let e = anyhow::anyhow!("disk on fire").context("backing up");
        assert_eq!(super::error_lines(&e), vec!["error: backing up".to_string(), "  caused by: disk on fire".into()]);
    }
}
