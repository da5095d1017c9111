//! The control requests that change or copy the store (`host::serve_calls` hands them here): a read
//! snapshot (`snapshot`) and an import (`data import`) take as long as the store or the file is large, so
//! each runs on a thread of its own and answers when done while trading goes on; `risk clear` reaches the
//! engine as an update, applied before its next bar. The options of an import and its summary are built
//! here for the command that imports itself as well (no daemon), so both print the same.

use super::link::EngineLink;
use crate::control::{ImportSummary, Request, Response};
use crate::data::{ImportOptions, ImportReport};
use crate::domain::{Symbol, Timeframe};
use crate::engine::{Event, Update};
use crate::store::Store;
use anyhow::Context;
use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Serves `req` (a snapshot, an import or a kill switch clear) and sends the answer to `reply`: at once,
/// or from the thread doing the work. `main` is the daemon's store, `account` the engine's account store
/// once open.
pub(super) fn serve(
    req: Request,
    reply: oneshot::Sender<Response>,
    main: &Store,
    account: Option<&Store>,
    engine: &mut dyn EngineLink,
    now: DateTime<Utc>,
) {
    let no_account = || Response::error("the daemon has not opened its account store yet");
    match req {
        Request::Snapshot { account: wanted } => match if wanted { account } else { Some(main) } {
            Some(store) => {
                let store = store.clone();
                off_thread("read snapshot", reply, move || snapshot(&store));
            }
            None => {
                let _ = reply.send(no_account());
            }
        },
        Request::Import { file, symbols, symbol, timeframe, date_format } => {
            match import_options(&symbols, symbol.as_deref(), &timeframe, date_format) {
                Ok(opts) => {
                    let store = main.clone();
                    off_thread("data import", reply, move || import(&store, &file, &opts));
                }
                Err(e) => {
                    let _ = reply.send(Response::error(format!("{e:#}")));
                }
            }
        }
        Request::RiskClear { who } => {
            let answer = account.map_or_else(no_account, |a| risk_clear(a, &who, now, engine));
            let _ = reply.send(answer);
        }
        other => {
            let _ = reply.send(Response::error(format!("{} is not served here", other.name())));
        }
    }
}

/// Runs `work` on a thread named after `what` and sends its answer to `reply`; where no thread can be
/// started the answer is that error, at once.
fn off_thread(what: &str, reply: oneshot::Sender<Response>, work: impl FnOnce() -> Response + Send + 'static) {
    let slot = Arc::new(Mutex::new(Some(reply)));
    let theirs = slot.clone();
    let spawned = std::thread::Builder::new().name(format!("tradebot-{}", what.replace(' ', "-"))).spawn(move || {
        let answer = work();
        if let Some(tx) = theirs.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(answer);
        }
    });
    if let Err(e) = spawned
        && let Some(tx) = slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    {
        let _ = tx.send(Response::error(format!("cannot start a thread for the {what}: {e}")));
    }
}

/// A read snapshot of `store` (`Store::snapshot`), as the answer.
fn snapshot(store: &Store) -> Response {
    match store.snapshot() {
        Ok(path) => Response::snapshot(path),
        Err(e) => Response::error(format!("cannot take a read snapshot of the store: {e}")),
    }
}

/// The options of `data import`, each bad one named by its flag.
pub(crate) fn import_options(
    symbols: &[String],
    symbol: Option<&str>,
    timeframe: &str,
    date_format: Option<String>,
) -> anyhow::Result<ImportOptions> {
    Ok(ImportOptions {
        symbols: symbols.iter().map(|s| Symbol::new(s)).collect::<Result<_, _>>().context("--symbols")?,
        symbol: symbol.map(Symbol::new).transpose().context("--symbol")?,
        timeframe: Timeframe::parse(timeframe).context("--timeframe")?,
        date_format,
    })
}

/// What an import read and stored, as answered and printed.
pub(crate) fn import_summary(r: &ImportReport, store: &Path) -> ImportSummary {
    ImportSummary {
        format: r.format.to_string(),
        rows: r.rows.clone(),
        new_bars: r.new_bars,
        filtered: r.filtered,
        empty: r.empty,
        bad: r.bad.iter().map(|b| (b.line, b.reason.clone())).collect(),
        stopped: r.stopped,
        store: store.display().to_string(),
    }
}

/// `data import` into `store`, run by the daemon (on its own thread: `off_thread`).
fn import(store: &Store, file: &Path, opts: &ImportOptions) -> Response {
    if !file.is_absolute() {
        return Response::error(format!("{}: the daemon needs the file's absolute path", file.display()));
    }
    let r = match crate::data::import_file(store, file, opts) {
        Ok(r) => r,
        Err(e) => {
            return Response::error(format!(
                "importing {}: {e:#} (the daemon reads the file as its own user: it must be readable by it)",
                file.display()
            ));
        }
    };
    if let Err(e) = store.flush() {
        return Response::error(format!("importing {}: flushing the store: {e}", file.display()));
    }
    log::info!("data: {} imported: {} new bars, {} bad rows", file.display(), r.new_bars, r.bad.len());
    Response::imported(format!("{} new bars", r.new_bars), import_summary(&r, store.dir()))
}

/// `risk clear` through the daemon: the kill switch as the engine's account store holds it, cleared by
/// the engine (on disk and in memory) before its next bar; not tripped, nothing is sent.
fn risk_clear(account: &Store, who: &str, at: DateTime<Utc>, engine: &mut dyn EngineLink) -> Response {
    match crate::risk::stored_state(account) {
        Err(e) => Response::error(format!("cannot read the kill switch: {e}")),
        Ok((None, _)) => Response::done(format!("kill switch was not tripped; nothing to clear ({who} at {at})")),
        Ok((Some(k), _)) => {
            engine.send(Event::Update(Update::ClearKill { who: who.to_string(), at }));
            Response::done(format!(
                "kill switch cleared by {who} at {at} (it tripped at {}: {}); orders are allowed again from the next bar",
                k.tripped_at, k.reason
            ))
        }
    }
}
