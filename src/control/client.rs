//! The command-line side of the control socket: one blocking request with timeouts. `NotRunning` tells
//! "no daemon here" apart from a daemon that answered badly, so `tradebot retrain` can run the pipeline
//! itself when no daemon runs.

use super::{Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Why a request over the control socket got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon listens on the socket (holds its path): the file is missing or nobody accepts.
    #[error("no tradebot daemon is listening on {0}")]
    NotRunning(String),
    /// Connecting, writing or reading failed, a timeout included.
    #[error("control socket {path}: {source}")]
    Io {
        /// The socket's path.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The daemon answered with a line that is not a `Response`.
    #[error("control socket {path}: unreadable answer {line:?}: {reason}")]
    BadAnswer {
        /// The socket's path.
        path: String,
        /// The line as received.
        line: String,
        /// The parser's message.
        reason: String,
    },
}

/// Sends one request to the daemon listening on `path` and waits for its one-line answer; `timeout`
/// bounds the write and the read each.
pub fn request(path: &Path, req: &Request, timeout: Duration) -> Result<Response, ClientError> {
    let p = path.display().to_string();
    let io = |source| ClientError::Io { path: p.clone(), source };
    let mut stream = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused) => {
            return Err(ClientError::NotRunning(p));
        }
        Err(e) => return Err(io(e)),
    };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut line = serde_json::to_string(req).map_err(|e| io(std::io::Error::other(e)))?;
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(io)?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).map_err(io)?;
    serde_json::from_str(answer.trim()).map_err(|e| ClientError::BadAnswer {
        path: p.clone(),
        line: answer.trim().to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{server, socket_path};
    use super::*;
    use crate::control::StatusReport;
    use std::os::unix::fs::PermissionsExt;
    use tokio::sync::mpsc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_reach_the_engine_loop_and_answers_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_path(dir.path());
        let listener = server::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "socket mode {mode:o}");
        assert!(server::bind(&path).is_err(), "a second daemon on the same socket must be refused");

        let audit = crate::logging::capture::containing("audit: control socket");
        let (tx, mut rx) = mpsc::channel::<server::Call>(4);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let srv = tokio::spawn(server::serve(listener, tx, async {
            let _ = stop_rx.await;
        }));
        // The "engine loop": answers status with a report, pause with a message.
        let engine = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((req, reply)) = rx.recv().await {
                seen.push(req.clone());
                let r = match req {
                    Request::Status => {
                        Response::status(StatusReport { mode: "paper".into(), equity: 101.5, ..Default::default() })
                    }
                    other => Response::done(format!("{other:?} done")),
                };
                let _ = reply.send(r);
            }
            seen
        });
        let p = path.clone();
        let answers = tokio::task::spawn_blocking(move || {
            let t = Duration::from_secs(5);
            let status = request(&p, &Request::Status, t).unwrap();
            let pause = request(&p, &Request::Pause, t).unwrap();
            // A malformed line gets an error that says what to send.
            let mut s = UnixStream::connect(&p).unwrap();
            s.write_all(b"{\"cmd\":\"explode\"}\n").unwrap();
            let mut bad = String::new();
            BufReader::new(&s).read_line(&mut bad).unwrap();
            (status, pause, bad)
        })
        .await
        .unwrap();
        assert_eq!(answers.0.status.as_ref().map(|s| s.equity), Some(101.5));
        assert_eq!(answers.1.message.as_deref(), Some("Pause done"));
        let bad: Response = serde_json::from_str(answers.2.trim()).unwrap();
        assert!(!bad.ok && bad.error.as_deref().unwrap_or("").contains("{\"cmd\":\"status\"}"), "{bad:?}");

        let _ = stop_tx.send(());
        srv.await.unwrap();
        drop(path);
        let seen = engine.await.unwrap();
        assert_eq!(seen, vec![Request::Status, Request::Pause]);
        // Issue 36: a pause over the socket leaves the dashboard's audit line; the status request none.
        assert_eq!(audit.lines(), vec![(log::Level::Info, "audit: control socket pause: Pause done".to_string())]);
    }

    #[test]
    fn no_daemon_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let e = request(&socket_path(dir.path()), &Request::Status, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, ClientError::NotRunning(_)), "{e}");
    }
}
