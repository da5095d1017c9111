//! Headless Chromium driven over the DevTools protocol: open a page, run a script in it (a click), read
//! the result. Enough for the dashboard's browser test; no other client needed.

use futures_util::{SinkExt, StreamExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// A headless Chromium with its DevTools port; killed when dropped.
pub(crate) struct Browser {
    child: Child,
    port: u16,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts `chromium` on `url` with a DevTools port and the profile in `profile`.
    pub(crate) fn open(chromium: &str, profile: &Path, url: &str) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
            .arg(format!("--remote-debugging-port={port}"))
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromium");
        Browser { child, port }
    }

    /// The page's DevTools WebSocket, once the page exists.
    async fn page_socket(&self) -> String {
        let list = format!("http://127.0.0.1:{}/json/list", self.port);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = reqwest::get(&list).await
                && let Ok(v) = r.json::<serde_json::Value>().await
                && let Some(ws) = v.as_array().and_then(|a| {
                    a.iter().find(|t| t["type"] == "page").and_then(|t| t["webSocketDebuggerUrl"].as_str())
                })
            {
                return ws.to_string();
            }
            assert!(Instant::now() < deadline, "chromium's DevTools never listed a page");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Evaluates `script` in the page and returns its value (JSON). A page still loading (its context
    /// replaced by a redirect) is tried again, up to 30 s.
    pub(crate) fn eval(&self, script: &str) -> serde_json::Value {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let v = self.eval_once(script).await;
                if let Some(value) = v["result"]["result"].get("value") {
                    return value.clone();
                }
                assert!(Instant::now() < deadline, "the script gave no value: {v}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    async fn eval_once(&self, script: &str) -> serde_json::Value {
        let params = serde_json::json!({ "expression": script, "returnByValue": true, "awaitPromise": true });
        self.send("Runtime.evaluate", params).await
    }

    /// Calls a DevTools `method` on the page and returns its answer (`{"id", "result"}` or `{"error"}`).
    pub(crate) fn call(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(self.send(method, params))
    }

    /// The page as a PNG `width` pixels wide and as tall as its content (at most `max_height`), once
    /// the page has had a second to lay itself out at that width. One DevTools session throughout: the
    /// emulated size lasts only as long as the session that set it.
    pub(crate) fn screenshot(&self, width: u32, max_height: u32) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let ws = self.page_socket().await;
            let (mut socket, _) = tokio_tungstenite::connect_async(ws.as_str()).await.expect("DevTools socket");
            let mut id = 0;
            let mut call = |method: &'static str, params: serde_json::Value| {
                id += 1;
                (id, serde_json::json!({ "id": id, "method": method, "params": params }))
            };
            let mut height = 900u64;
            for round in 0..2 {
                let params = serde_json::json!({
                    "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600,
                });
                let (i, msg) = call("Emulation.setDeviceMetricsOverride", params);
                let r = exchange(&mut socket, i, msg).await;
                assert!(r.get("error").is_none(), "{r}");
                tokio::time::sleep(Duration::from_millis(1500)).await;
                if round == 0 {
                    let params = serde_json::json!({
                        "expression": "document.documentElement.scrollHeight", "returnByValue": true,
                    });
                    let (i, msg) = call("Runtime.evaluate", params);
                    let r = exchange(&mut socket, i, msg).await;
                    height = r["result"]["result"]["value"].as_u64().unwrap_or(900).min(u64::from(max_height));
                }
            }
            let (i, msg) = call("Page.captureScreenshot", serde_json::json!({ "format": "png" }));
            let r = exchange(&mut socket, i, msg).await;
            let data = r["result"]["data"].as_str().unwrap_or_else(|| panic!("no screenshot: {r}"));
            base64_decode(data)
        })
    }

    async fn send(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let ws = self.page_socket().await;
        let (mut socket, _) = tokio_tungstenite::connect_async(ws.as_str()).await.expect("DevTools socket");
        let call = serde_json::json!({ "id": 1, "method": method, "params": params });
        socket.send(Message::Text(call.to_string().into())).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let msg = tokio::time::timeout_at(deadline, socket.next()).await.expect("no DevTools answer");
            let Some(Ok(Message::Text(t))) = msg else { continue };
            let v: serde_json::Value = serde_json::from_str(&t).unwrap();
            if v["id"] == 1 {
                return v;
            }
        }
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends `msg` on `socket` and waits for the answer with `id`.
async fn exchange(socket: &mut Socket, id: u64, msg: serde_json::Value) -> serde_json::Value {
    socket.send(Message::Text(msg.to_string().into())).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = tokio::time::timeout_at(deadline, socket.next()).await.expect("no DevTools answer");
        let Some(Ok(Message::Text(t))) = got else { continue };
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        if v["id"] == id {
            return v;
        }
    }
}

/// Standard base64 (DevTools' screenshots), padding ignored.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=' && !c.is_ascii_whitespace()).map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, d)| acc | (u32::from(*d) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
