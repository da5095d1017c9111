//! The trade_updates task: connect → auth → listen → forward, and the reconnect loop around it.
//!
//! Everything here runs inside the stream's own task; aborting that task (dropping the handle) drops the
//! socket and loses nothing already handed to the consumer, so every function here is cancellation-safe
//! in that sense. No lock is held anywhere in these functions.

use super::{UpdatesConfig, UpdatesError, UpdatesEvent};
use crate::alpaca::event::UpdatesItem;
use crate::alpaca::parse::updates_frame;
use crate::alpaca::wire::updates as wu;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async_with_config};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Tx = mpsc::Sender<Result<UpdatesEvent, UpdatesError>>;

enum End {
    Lost(String),
    Fatal(UpdatesError),
    Stopped,
}

pub(super) async fn run(cfg: UpdatesConfig, tx: Tx) {
    let (mut attempt, mut connected_before) = (0u32, false);
    loop {
        let mut listening = false;
        match session(&cfg, &tx, connected_before, &mut listening).await {
            End::Stopped => return,
            End::Fatal(e) => {
                log::error!("alpaca trade_updates: {e}");
                let _ = tx.send(Err(e)).await;
                return;
            }
            End::Lost(reason) => {
                log::warn!("alpaca trade_updates: connection lost: {reason}");
                if listening && tx.send(Ok(UpdatesEvent::Disconnected { reason })).await.is_err() {
                    return;
                }
            }
        }
        if listening {
            connected_before = true;
            attempt = 0;
        }
        tokio::time::sleep(cfg.backoff.delay(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

async fn session(cfg: &UpdatesConfig, tx: &Tx, reconnect: bool, listening: &mut bool) -> End {
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
    let auth = wu::AuthRequest {
        action: "auth".into(),
        key: cfg.key_id.expose().into(),
        secret: cfg.secret_key.expose().into(),
    };
    if let Err(e) = send(cfg, &mut ws, &auth).await {
        return e;
    }
    match expect(cfg, &mut ws).await {
        Ok(UpdatesItem::Authorized) => {}
        Ok(UpdatesItem::Unauthorized { .. }) => return End::Fatal(UpdatesError::Auth { url: cfg.url.to_string() }),
        Ok(other) => return End::Lost(format!("unexpected reply to auth: {other:?}")),
        Err(e) => return e,
    }
    let listen =
        wu::ListenRequest { action: "listen".into(), data: wu::Listening { streams: vec!["trade_updates".into()] } };
    if let Err(e) = send(cfg, &mut ws, &listen).await {
        return e;
    }
    match expect(cfg, &mut ws).await {
        Ok(UpdatesItem::Listening(s)) if s.iter().any(|s| s == "trade_updates") => {}
        Ok(other) => return End::Lost(format!("unexpected reply to listen: {other:?}")),
        Err(e) => return e,
    }
    *listening = true;
    if tx.send(Ok(UpdatesEvent::Connected { reconnect })).await.is_err() {
        return End::Stopped;
    }
    stream(cfg, &mut ws, tx).await
}

async fn send<T: serde::Serialize>(cfg: &UpdatesConfig, ws: &mut Ws, msg: &T) -> Result<(), End> {
    let text = serde_json::to_string(msg).map_err(|e| End::Lost(format!("encode: {e}")))?;
    match timeout(cfg.io_timeout, ws.send(Message::text(text))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(End::Lost(format!("send: {e}"))),
        Err(_) => Err(End::Lost("send timed out".into())),
    }
}

/// The payload of the next text or binary frame before `deadline`.
async fn read(ws: &mut Ws, deadline: Instant) -> Result<Option<Vec<u8>>, End> {
    match timeout_at(deadline, ws.next()).await {
        Err(_) => Err(End::Lost("no frame in time: half-dead socket".into())),
        Ok(None) | Ok(Some(Ok(Message::Close(_)))) => Err(End::Lost("closed".into())),
        Ok(Some(Err(e))) => Err(End::Lost(e.to_string())),
        Ok(Some(Ok(Message::Text(t)))) => Ok(Some(t.as_bytes().to_vec())),
        Ok(Some(Ok(Message::Binary(b)))) => Ok(Some(b.to_vec())),
        Ok(Some(Ok(_))) => Ok(None),
    }
}

/// The next control reply (authorization or listening) within `io_timeout`.
async fn expect(cfg: &UpdatesConfig, ws: &mut Ws) -> Result<UpdatesItem, End> {
    let deadline = Instant::now() + cfg.io_timeout;
    loop {
        let Some(payload) = read(ws, deadline).await? else { continue };
        if let Some(item) = updates_frame(&payload).items.into_iter().find(|i| !matches!(i, UpdatesItem::Update(_))) {
            return Ok(item);
        }
    }
}

async fn stream(cfg: &UpdatesConfig, ws: &mut Ws, tx: &Tx) -> End {
    let mut ping = tokio::time::interval(cfg.ping_interval);
    ping.tick().await;
    let mut deadline = Instant::now() + cfg.silence_timeout;
    loop {
        tokio::select! {
            r = read(ws, deadline) => {
                deadline = Instant::now() + cfg.silence_timeout;
                let payload = match r {
                    Ok(Some(p)) => p,
                    Ok(None) => continue,
                    Err(end) => return end,
                };
                for item in updates_frame(&payload).items {
                    if let UpdatesItem::Update(u) = item
                        && tx.send(Ok(UpdatesEvent::Order(u))).await.is_err()
                    {
                        return End::Stopped;
                    }
                }
            }
            _ = ping.tick() => {
                match timeout(cfg.io_timeout, ws.send(Message::Ping(Vec::new().into()))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return End::Lost(format!("ping: {e}")),
                    Err(_) => return End::Lost("ping timed out".into()),
                }
            }
        }
    }
}
