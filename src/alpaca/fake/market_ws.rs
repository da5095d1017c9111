//! The fake market-data stream: `connected` → auth (10 s) → subscribe/unsubscribe answered with the full
//! set → bars for subscribed symbols. Connection limit (406), auth failure (402), dropped and half-dead
//! sockets on command.

use super::{App, WsCmd};
use crate::alpaca::wire::market as wm;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

pub(super) fn router(app: App) -> Router {
    Router::new()
        .route("/v2/iex", get(upgrade))
        .route("/v2/sip", get(upgrade))
        .route("/v2/test", get(upgrade))
        .route("/v1beta3/crypto/us", get(upgrade))
        .with_state(app)
}

async fn upgrade(State(app): State<App>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |sock| session(app, sock))
}

/// Decrements the active-connection count however the session ends.
struct Active(App);
impl Drop for Active {
    fn drop(&mut self) {
        self.0.lock().market_active -= 1;
    }
}

fn frame(msgs: &[wm::StreamMsg]) -> Message {
    Message::Text(serde_json::to_string(msgs).unwrap_or_default().into())
}

fn err(code: i64, msg: &str) -> Message {
    frame(&[wm::StreamMsg::Error { code, msg: msg.into() }])
}

/// How long a send may wait on a client that does not read before the session gives the client up (a
/// server does not wait on a reader forever: its socket buffers full, it disconnects it).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `msg`: `false` when the socket failed or its client did not take the frame within `SEND_TIMEOUT`.
async fn send(sock: &mut WebSocket, msg: Message) -> bool {
    matches!(tokio::time::timeout(SEND_TIMEOUT, sock.send(msg)).await, Ok(Ok(())))
}

async fn session(app: App, mut sock: WebSocket) {
    let refused = {
        let mut s = app.lock();
        if s.refuse_next_connections > 0 || s.market_active >= s.max_market_connections {
            s.refuse_next_connections = s.refuse_next_connections.saturating_sub(1);
            s.market_refused += 1;
            true
        } else {
            s.market_active += 1;
            s.market_connections += 1;
            false
        }
    };
    if refused {
        if send(&mut sock, err(406, "connection limit exceeded")).await {
            send(&mut sock, Message::Close(None)).await;
        }
        return;
    }
    let _active = Active(app.clone());
    let mut rx = app.market_tx.subscribe();
    if !send(&mut sock, frame(&[wm::StreamMsg::Success { msg: "connected".into() }])).await {
        return;
    }
    if !authenticate(&app, &mut sock).await {
        return;
    }
    let mut subs = Subs::default();
    loop {
        tokio::select! {
            msg = sock.recv() => match msg {
                Some(Ok(Message::Text(t))) => {
                    app.lock().market_received.push(t.to_string());
                    let reply = subs.handle(&t);
                    if !send(&mut sock, reply).await { return; }
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return,
            },
            cmd = rx.recv() => match cmd {
                Ok(WsCmd::Bar(b)) if subs.has_bar(&b) => {
                    if !send(&mut sock, frame(&[wm::StreamMsg::Bar(b)])).await { return; }
                }
                Ok(WsCmd::Bar(_)) => {}
                // A client that does not keep up is told so with Alpaca's code for it (`407 slow client`,
                // which may precede Alpaca's disconnect) and cut off: it reconnects and backfills, where a
                // silent skip would lose the messages it fell behind by. A client that does not take even
                // that (its buffers still full after `SEND_TIMEOUT`) is dropped without it.
                Err(RecvError::Lagged(n)) => {
                    log::warn!("fake alpaca: market socket {n} messages behind: 407 slow client, closing");
                    app.lock().market_slow_clients += 1;
                    if send(&mut sock, err(407, "slow client")).await {
                        send(&mut sock, Message::Close(None)).await;
                    }
                    return;
                }
                Ok(WsCmd::Raw(f)) => {
                    if !send(&mut sock, Message::Text(f.into())).await { return; }
                }
                Ok(WsCmd::Drop) | Err(RecvError::Closed) => return,
                Ok(WsCmd::Silence(d)) => {
                    tokio::time::sleep(d).await;
                    return;
                }
            },
        }
    }
}

/// Waits up to 10 s for a valid auth message; answers it. `false`: the session is over.
async fn authenticate(app: &App, sock: &mut WebSocket) -> bool {
    let Ok(Some(Ok(Message::Text(t)))) = tokio::time::timeout(Duration::from_secs(10), sock.recv()).await else {
        send(sock, err(404, "auth timeout")).await;
        return false;
    };
    app.lock().market_received.push(t.to_string());
    let Ok(auth) = serde_json::from_str::<wm::AuthRequest>(&t) else {
        send(sock, err(401, "not authenticated")).await;
        return false;
    };
    let keys = app.lock().keys.clone();
    if auth.action != "auth" || (auth.key, auth.secret) != keys {
        if send(sock, err(402, "auth failed")).await {
            send(sock, Message::Close(None)).await;
        }
        return false;
    }
    send(sock, frame(&[wm::StreamMsg::Success { msg: "authenticated".into() }])).await
}

#[derive(Default)]
struct Subs {
    trades: BTreeSet<String>,
    quotes: BTreeSet<String>,
    bars: BTreeSet<String>,
    updated_bars: BTreeSet<String>,
    daily_bars: BTreeSet<String>,
    statuses: BTreeSet<String>,
}

impl Subs {
    fn has_bar(&self, b: &wm::Bar) -> bool {
        self.bars.contains("*") || b.symbol.as_ref().is_some_and(|s| self.bars.contains(s))
    }

    fn handle(&mut self, text: &str) -> Message {
        let Ok(req) = serde_json::from_str::<wm::SubscribeRequest>(text) else { return err(400, "invalid syntax") };
        let c = &req.channels;
        let lists = [&c.trades, &c.quotes, &c.bars, &c.updated_bars, &c.daily_bars, &c.statuses];
        let mine = [
            &mut self.trades,
            &mut self.quotes,
            &mut self.bars,
            &mut self.updated_bars,
            &mut self.daily_bars,
            &mut self.statuses,
        ];
        match req.action.as_str() {
            "auth" => return err(403, "already authenticated"),
            "subscribe" if lists.iter().all(|l| l.is_empty()) => return err(400, "invalid syntax"),
            "subscribe" => mine.into_iter().zip(lists).for_each(|(m, l)| m.extend(l.iter().cloned())),
            "unsubscribe" => mine.into_iter().zip(lists).for_each(|(m, l)| l.iter().for_each(|s| _ = m.remove(s))),
            _ => return err(400, "invalid syntax"),
        }
        let v = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        frame(&[wm::StreamMsg::Subscription(wm::Subscription {
            trades: v(&self.trades),
            quotes: v(&self.quotes),
            bars: v(&self.bars),
            updated_bars: v(&self.updated_bars),
            daily_bars: v(&self.daily_bars),
            statuses: v(&self.statuses),
            lulds: Vec::new(),
            corrections: v(&self.trades),
            cancel_errors: v(&self.trades),
            imbalances: Vec::new(),
            orderbooks: Vec::new(),
        })])
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FakeAlpaca, KEY_ID, SECRET_KEY};
    use futures_util::SinkExt;
    use std::time::{Duration, Instant};
    use tokio_tungstenite::tungstenite::Message as Frame;

    /// A client that authenticates and then never reads: frames of 1 MB fill its socket's buffers, and the
    /// fake gives the client up (`SEND_TIMEOUT` after the send that cannot go through) instead of waiting on
    /// it for as long as it holds the socket open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_never_reads_is_given_up_not_waited_on() {
        let fake = FakeAlpaca::start(0).await.unwrap();
        let (mut ws, _) = tokio_tungstenite::connect_async(fake.ws_url("v2/iex").as_str()).await.unwrap();
        let auth = format!(r#"{{"action":"auth","key":"{KEY_ID}","secret":"{SECRET_KEY}"}}"#);
        ws.send(Frame::text(auth)).await.unwrap();
        let start = Instant::now();
        while fake.lock().market_received.is_empty() {
            assert!(start.elapsed() < Duration::from_secs(10), "the fake never read the auth message");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(fake.lock().market_active, 1);
        // 32 MB unread: more than the kernel buffers of both ends hold.
        let big = format!(r#"[{{"T":"error","code":0,"msg":"{}"}}]"#, "x".repeat(1 << 20));
        for _ in 0..32 {
            fake.send_market_raw(&big);
        }
        let sent = Instant::now();
        while fake.lock().market_active > 0 {
            assert!(sent.elapsed() < Duration::from_secs(20), "the fake still waits on a client that does not read");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The client held its socket open, unread, the whole time.
        drop(ws);
    }
}
