//! The fake trade_updates stream (`/stream`): no welcome; auth in either form (current `auth` with
//! key/secret, legacy `authenticate` with key_id/secret_key); `listen`; then every order event, sent as
//! binary frames holding JSON, as paper does.

use super::{App, UpdCmd};
use crate::alpaca::wire::updates as wu;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use tokio::sync::broadcast::error::RecvError;

pub(super) fn router(app: App) -> Router {
    Router::new().route("/stream", get(upgrade)).with_state(app)
}

async fn upgrade(State(app): State<App>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |sock| session(app, sock))
}

fn msg(m: &wu::UpdatesMsg) -> Message {
    Message::Binary(serde_json::to_vec(m).unwrap_or_default().into())
}

fn authorization(ok: bool, action: &str) -> Message {
    let status = if ok { "authorized" } else { "unauthorized" };
    msg(&wu::UpdatesMsg::Authorization(wu::Authorization { status: status.into(), action: action.into() }))
}

/// The keys of an auth message in either form, or `None` when it is not one.
fn keys_of(text: &str) -> Option<(String, String)> {
    if let Ok(a) = serde_json::from_str::<wu::AuthRequest>(text)
        && a.action == "auth"
    {
        return Some((a.key, a.secret));
    }
    let l = serde_json::from_str::<wu::LegacyAuthRequest>(text).ok().filter(|a| a.action == "authenticate")?;
    Some((l.data.key_id, l.data.secret_key))
}

/// A `listen` request, or `None`.
fn listen_of(text: &str) -> Option<wu::ListenRequest> {
    serde_json::from_str::<wu::ListenRequest>(text).ok().filter(|l| l.action == "listen")
}

async fn session(app: App, mut sock: WebSocket) {
    let mut rx = app.updates_tx.subscribe();
    app.lock().updates_connections += 1;
    let (mut authed, mut listening) = (false, false);
    loop {
        tokio::select! {
            m = sock.recv() => {
                let text = match m {
                    Some(Ok(Message::Text(t))) => t.to_string(),
                    Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
                    Some(Ok(_)) => continue,
                    None | Some(Err(_)) => return,
                };
                app.lock().updates_received.push(text.clone());
                let reply = if let Some(keys) = keys_of(&text) {
                    authed = keys == app.lock().keys;
                    authorization(authed, "authenticate")
                } else if let Some(l) = listen_of(&text) {
                    if !authed {
                        authorization(false, "listen")
                    } else {
                        let streams: Vec<String> = l.data.streams.into_iter().filter(|s| s == "trade_updates").collect();
                        listening = !streams.is_empty();
                        msg(&wu::UpdatesMsg::Listening(wu::Listening { streams }))
                    }
                } else {
                    continue;
                };
                if sock.send(reply).await.is_err() { return; }
            }
            u = rx.recv() => match u {
                Ok(UpdCmd::Msg(text)) if listening => {
                    if sock.send(Message::Binary(text.into_bytes().into())).await.is_err() { return; }
                }
                Ok(UpdCmd::Drop) => return,
                Ok(UpdCmd::Msg(_)) => {}
                // A client that fell behind is cut off (Alpaca documents no code for it on this stream):
                // it reconnects and reconciles, where a silent skip would lose the updates it missed.
                Err(RecvError::Lagged(n)) => {
                    log::warn!("fake alpaca: trade_updates socket {n} messages behind, closing");
                    let _ = sock.send(Message::Close(None)).await;
                    return;
                }
                Err(RecvError::Closed) => return,
            },
        }
    }
}
