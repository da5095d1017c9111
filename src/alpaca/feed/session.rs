//! The feed's background task: one session per connection (handshake, backfill, stream) and the
//! reconnect loop around it.
//!
//! Everything here runs inside the stream's own task; aborting that task (dropping the handle) drops the
//! socket and loses nothing already handed to the consumer, so every function here is cancellation-safe
//! in that sense. No lock is held anywhere in these functions.

use super::{BarGate, StreamConfig, StreamError};
use crate::alpaca::event::{BarKind, Channels, MarketEvent, StreamBar, StreamControl, StreamItem};
use crate::alpaca::parse::market_frame;
use crate::alpaca::rest::{BarsQuery, RestClient};
use crate::alpaca::wire::market as wm;
use crate::domain::Timeframe;
use crate::feed::FeedEvent;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async_with_config};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Tx = mpsc::Sender<Result<FeedEvent, StreamError>>;

/// How a session ended.
enum End {
    /// Reconnect after a backoff.
    Lost(String),
    /// 406: wait (backoff) and try again.
    ConnLimit,
    Fatal(StreamError),
    /// The consumer is gone.
    Stopped,
}

/// The reconnect loop. Returns when the consumer drops the feed or a fatal error was delivered.
pub(super) async fn run(cfg: StreamConfig, rest: RestClient, tx: Tx) {
    let mut gate = BarGate::resuming(&cfg.resume);
    let mut attempt = 0u32;
    loop {
        let mut established = false;
        match session(&cfg, &rest, &mut gate, &tx, &mut established).await {
            End::Stopped => return,
            End::Fatal(e) => {
                log::error!("alpaca feed: {e}");
                let _ = tx.send(Err(e)).await;
                return;
            }
            End::ConnLimit => {
                log::warn!("alpaca feed: connection limit exceeded (406); another client uses these keys")
            }
            End::Lost(reason) => {
                log::warn!("alpaca feed: connection lost: {reason}");
                if established && tx.send(Ok(FeedEvent::Disconnected { reason })).await.is_err() {
                    return;
                }
            }
        }
        if established {
            attempt = 0;
        }
        let wait = cfg.backoff.delay(attempt);
        attempt = attempt.saturating_add(1);
        log::info!("alpaca feed: reconnecting in {wait:?} (attempt {attempt})");
        tokio::time::sleep(wait).await;
    }
}

async fn session(cfg: &StreamConfig, rest: &RestClient, gate: &mut BarGate, tx: &Tx, established: &mut bool) -> End {
    let mut ws = match timeout(
        cfg.io_timeout,
        connect_async_with_config(cfg.url.as_str(), Some(crate::alpaca::ws_limits()), true),
    )
    .await
    {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => return End::Lost(format!("connect: {e}")),
        Err(_) => return End::Lost("connect timed out".into()),
    };
    if let Err(end) = handshake(cfg, &mut ws).await {
        return end;
    }
    *established = true;
    // Until caught up: a backfill slowed by rate limits ends well before now, and a bucket that closed in
    // between must not be closed by the clock before its last minutes come (they would wait in the
    // socket behind it). Another round fetches from where the last one ended.
    let mut backfilled = 0;
    for _ in 0..MAX_BACKFILL_ROUNDS {
        let (n, until) = match backfill(cfg, rest, gate, tx).await {
            Ok(done) => done,
            Err(end) => return end,
        };
        backfilled += n;
        if crate::clock::now() - until < chrono::Duration::minutes(1) {
            break;
        }
    }
    if tx.send(Ok(FeedEvent::Connected { backfilled })).await.is_err() {
        return End::Stopped;
    }
    stream(cfg, &mut ws, gate, tx).await
}

/// `connected` → auth → `authenticated` → subscribe → a `subscription` covering the request.
async fn handshake(cfg: &StreamConfig, ws: &mut Ws) -> Result<(), End> {
    expect(cfg, ws, |c| matches!(c, StreamControl::Connected)).await?;
    let auth = wm::AuthRequest {
        action: "auth".into(),
        key: cfg.key_id.expose().into(),
        secret: cfg.secret_key.expose().into(),
    };
    send(cfg, ws, &auth).await?;
    expect(cfg, ws, |c| matches!(c, StreamControl::Authenticated)).await?;
    let syms: Vec<String> = cfg.symbols.iter().map(|s| s.to_string()).collect();
    let channels = wm::Subscription {
        bars: syms.clone(),
        updated_bars: syms.clone(),
        statuses: if cfg.statuses { syms } else { Vec::new() },
        ..wm::Subscription::default()
    };
    let wanted = Channels {
        bars: channels.bars.iter().cloned().collect(),
        updated_bars: channels.updated_bars.iter().cloned().collect(),
        statuses: channels.statuses.iter().cloned().collect(),
        ..Channels::default()
    };
    send(cfg, ws, &wm::SubscribeRequest { action: "subscribe".into(), channels }).await?;
    let reply = expect(cfg, ws, |c| matches!(c, StreamControl::Subscription(_))).await?;
    match reply {
        StreamControl::Subscription(got) if wanted.is_covered_by(&got) => Ok(()),
        other => Err(End::Fatal(StreamError::Subscription {
            url: cfg.url.to_string(),
            detail: format!("asked {wanted:?}, got {other:?}"),
        })),
    }
}

async fn send<T: serde::Serialize>(cfg: &StreamConfig, ws: &mut Ws, msg: &T) -> Result<(), End> {
    let text = serde_json::to_string(msg).map_err(|e| End::Lost(format!("encode: {e}")))?;
    match timeout(cfg.io_timeout, ws.send(Message::text(text))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(End::Lost(format!("send: {e}"))),
        Err(_) => Err(End::Lost("send timed out".into())),
    }
}

/// Reads until a control message; returns it when `want` accepts it, maps stream errors otherwise.
async fn expect(cfg: &StreamConfig, ws: &mut Ws, want: impl Fn(&StreamControl) -> bool) -> Result<StreamControl, End> {
    let deadline = Instant::now() + cfg.io_timeout;
    loop {
        let payload = match timeout_at(deadline, ws.next()).await {
            Err(_) => return Err(End::Lost("handshake timed out".into())),
            Ok(None) => return Err(End::Lost("closed during handshake".into())),
            Ok(Some(Err(e))) => return Err(End::Lost(format!("handshake: {e}"))),
            Ok(Some(Ok(Message::Text(t)))) => t.as_bytes().to_vec(),
            Ok(Some(Ok(Message::Binary(b)))) => b.to_vec(),
            Ok(Some(Ok(Message::Close(_)))) => return Err(End::Lost("closed by server during handshake".into())),
            Ok(Some(Ok(_))) => continue,
        };
        for item in market_frame(&payload).items {
            match item {
                StreamItem::Control(StreamControl::Error { code, msg }) => return Err(stream_error(cfg, code, msg)),
                StreamItem::Control(c) if want(&c) => return Ok(c),
                other => log::debug!("alpaca feed: ignored during handshake: {other:?}"),
            }
        }
    }
}

/// Alpaca's stream error codes: 406 waits, bad keys and plan/subscription problems are fatal.
fn stream_error(cfg: &StreamConfig, code: i64, msg: String) -> End {
    let url = cfg.url.to_string();
    match code {
        406 => End::ConnLimit,
        402 => End::Fatal(StreamError::Auth { url, msg }),
        405 | 409..=413 => End::Fatal(StreamError::Refused { url, code, msg }),
        _ => End::Lost(format!("stream error {code}: {msg}")),
    }
}

/// Backfill rounds at most per connection (see `session`).
const MAX_BACKFILL_ROUNDS: usize = 5;

/// Fetches the bars missed since the last one delivered (or since `backfill_from`) up to now; returns how
/// many were new and the end asked for.
async fn backfill(
    cfg: &StreamConfig,
    rest: &RestClient,
    gate: &mut BarGate,
    tx: &Tx,
) -> Result<(usize, chrono::DateTime<chrono::Utc>), End> {
    let until = crate::clock::now();
    let Some(start) = gate.resume_from(&cfg.symbols, cfg.backfill_from) else { return Ok((0, until)) };
    let q = BarsQuery {
        symbols: cfg.symbols.clone(),
        timeframe: Timeframe::MIN1,
        start,
        end: until,
        limit: 10_000,
        feed: cfg.rest_feed.clone(),
        page_token: None,
    };
    let bars = match rest.fetch_bars(&q, 1000).await {
        Ok(b) => b,
        Err(e) if e.is_recoverable() => return Err(End::Lost(format!("backfill: {e}"))),
        Err(e) => return Err(End::Fatal(StreamError::Backfill(e))),
    };
    let mut n = 0;
    for bar in bars {
        if gate.admit(&bar) {
            n += 1;
            if tx.send(Ok(FeedEvent::Bar(bar))).await.is_err() {
                return Err(End::Stopped);
            }
        }
    }
    Ok((n, until))
}

/// Streams until the socket dies: pings every `ping_interval`, gives up after `silence_timeout` without
/// any frame.
async fn stream(cfg: &StreamConfig, ws: &mut Ws, gate: &mut BarGate, tx: &Tx) -> End {
    let mut ping = tokio::time::interval(cfg.ping_interval);
    ping.tick().await;
    let mut deadline = Instant::now() + cfg.silence_timeout;
    // The last stream error the server sent: it says why a close that follows came (`407 slow client`).
    let mut warned: Option<String> = None;
    loop {
        tokio::select! {
            m = timeout_at(deadline, ws.next()) => {
                let payload = match m {
                    Err(_) => return End::Lost(format!("no frame for {:?}: half-dead socket", cfg.silence_timeout)),
                    Ok(None) => return End::Lost(after("closed", &warned)),
                    Ok(Some(Err(e))) => return End::Lost(after(&e.to_string(), &warned)),
                    Ok(Some(Ok(Message::Close(_)))) => return End::Lost(after("closed by server", &warned)),
                    Ok(Some(Ok(Message::Text(t)))) => t.as_bytes().to_vec(),
                    Ok(Some(Ok(Message::Binary(b)))) => b.to_vec(),
                    Ok(Some(Ok(_))) => Vec::new(),
                };
                deadline = Instant::now() + cfg.silence_timeout;
                if !payload.is_empty()
                    && let Some(end) = deliver(cfg, &payload, gate, tx, &mut warned).await
                {
                    return end;
                }
            }
            _ = ping.tick() => {
                if let Err(end) = timeout(cfg.io_timeout, ws.send(Message::Ping(Vec::new().into()))).await
                    .map_err(|_| End::Lost("ping timed out".into()))
                    .and_then(|r| r.map_err(|e| End::Lost(format!("ping: {e}"))))
                {
                    return end;
                }
            }
        }
    }
}

/// `what` happened to the socket, after the stream error the server sent before it, if any.
fn after(what: &str, warned: &Option<String>) -> String {
    match warned {
        Some(error) => format!("{what} after {error}"),
        None => what.into(),
    }
}

/// Passes a frame's items on; `Some` ends the session. A stream error that does not end it is logged and
/// kept in `warned` until data follows it.
async fn deliver(
    cfg: &StreamConfig,
    payload: &[u8],
    gate: &mut BarGate,
    tx: &Tx,
    warned: &mut Option<String>,
) -> Option<End> {
    for item in market_frame(payload).items {
        let ev = match item {
            StreamItem::Market(MarketEvent::Bar(StreamBar { kind: BarKind::Minute, bar, .. })) => {
                if !gate.admit(&bar) {
                    continue;
                }
                FeedEvent::Bar(bar)
            }
            StreamItem::Market(MarketEvent::Bar(StreamBar { kind: BarKind::Updated, bar, .. })) => {
                if gate.seen(&bar) {
                    FeedEvent::BarUpdated(bar)
                } else if gate.admit(&bar) {
                    FeedEvent::Bar(bar)
                } else {
                    continue;
                }
            }
            StreamItem::Market(MarketEvent::Status(s)) => FeedEvent::Status {
                halted: s.is_halt(),
                detail: format!("{} ({})", s.message, s.reason_message),
                symbol: s.symbol,
                t: s.time,
            },
            // Trades, quotes, limit bands, imbalances, corrections: not subscribed, not traded on.
            StreamItem::Market(m) => {
                log::trace!("alpaca feed: {m:?} ignored");
                continue;
            }
            StreamItem::Control(StreamControl::Error { code, msg }) => match stream_error(cfg, code, msg) {
                End::Lost(reason) => {
                    log::warn!("alpaca feed: {reason}");
                    *warned = Some(reason);
                    continue;
                }
                end => return Some(end),
            },
            StreamItem::Control(c) => {
                log::debug!("alpaca feed: control message while streaming: {c:?}");
                continue;
            }
        };
        if tx.send(Ok(ev)).await.is_err() {
            return Some(End::Stopped);
        }
        // Data after the error: the stream went on, and a later close is not the error's.
        *warned = None;
    }
    None
}
