//! The daemon side of the control socket. Each request goes to the engine loop as `(Request, reply)` over
//! a channel and the answer goes back to the client; nothing here holds daemon state. Every read and every
//! wait has a timeout, and a request line is capped in length, so a stuck or hostile client costs one task.

use super::{Request, Response};
use std::io;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

/// A request and where its answer goes.
pub type Call = (Request, oneshot::Sender<Response>);

const MAX_LINE: u64 = 64 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The engine answers between two bars; a retrain request only starts the run.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// A snapshot (a copy of every tree) and an import (a whole file) are done off the engine's thread and
/// take as long as the store or the file is large.
pub const LONG_ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the engine's answer to `req` may take.
pub fn answer_timeout(req: &Request) -> Duration {
    match req {
        Request::Snapshot { .. } | Request::Import { .. } => LONG_ANSWER_TIMEOUT,
        _ => ANSWER_TIMEOUT,
    }
}

/// Binds the socket with mode 0600. A stale socket file (no daemon behind it) is replaced; a live one is
/// an error naming it, since it means another daemon runs on this state directory.
///
/// The mode comes from the umask at `bind` (not a chmod after it), so no other user can connect in
/// between. The umask is the process's: for the one system call other threads' new files are at most
/// more private, and the daemon creates none then (the host starts its tasks after this).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: another tradebot is listening here; stop it first", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    use nix::sys::stat::{Mode, umask};
    let before = umask(Mode::from_bits_truncate(0o177));
    let listener = UnixListener::bind(path);
    umask(before);
    listener
}

/// Accepts connections until `shutdown` resolves. Cancellation-safe: dropping it drops only connection
/// tasks, whose requests are answered by the engine or not at all.
pub async fn serve(listener: UnixListener, calls: mpsc::Sender<Call>, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(handle(stream, calls.clone()));
                }
                Err(e) => {
                    log::warn!("control socket: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

async fn handle(stream: UnixStream, calls: mpsc::Sender<Call>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read.take(MAX_LINE));
    loop {
        let mut line = String::new();
        match tokio::time::timeout(IO_TIMEOUT, lines.read_line(&mut line)).await {
            Ok(Ok(0)) | Err(_) => return,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                log::debug!("control socket: read failed: {e}");
                return;
            }
        }
        if !line.ends_with('\n') {
            let _ = reply(&mut write, &Response::error(format!("request longer than {MAX_LINE} bytes"))).await;
            return;
        }
        let response = answer(line.trim(), &calls).await;
        if reply(&mut write, &response).await.is_err() {
            return;
        }
    }
}

async fn answer(line: &str, calls: &mpsc::Sender<Call>) -> Response {
    let request: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => {
            return Response::error(format!(
                "bad request {line:?}: {e}; send one JSON object per line, e.g. {{\"cmd\":\"status\"}} (status, retrain, pause, resume, flatten, promote, rollback, snapshot, risk_clear, import)"
            ));
        }
    };
    let (tx, rx) = oneshot::channel();
    if calls.send((request.clone(), tx)).await.is_err() {
        return Response::error("the daemon is shutting down");
    }
    let wait = answer_timeout(&request);
    match tokio::time::timeout(wait, rx).await {
        Ok(Ok(r)) => {
            // The same audit line as the dashboard's controls (`control::audit`).
            super::audit("control socket", &request, &r);
            r
        }
        Ok(Err(_)) => Response::error("the daemon dropped the request (shutting down?)"),
        Err(_) => Response::error(format!("no answer from the engine within {}s", wait.as_secs())),
    }
}

async fn reply(write: &mut tokio::net::unix::OwnedWriteHalf, r: &Response) -> io::Result<()> {
    let mut text = serde_json::to_string(r).map_err(io::Error::other)?;
    text.push('\n');
    tokio::time::timeout(IO_TIMEOUT, write.write_all(text.as_bytes()))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "control client does not read"))?
}
