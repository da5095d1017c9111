//! Delivery against a local HTTP receiver: each target's format, retries after failures, the queue.

use super::*;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use std::sync::{Arc, Mutex};

/// What the receiver got: (path, body), and how many more requests it fails with a 500.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    pub got: Arc<Mutex<Vec<(String, serde_json::Value)>>>,
    pub fail: Arc<Mutex<usize>>,
}

impl Receiver {
    /// Serves on a free loopback port; returns its base URL.
    pub(crate) async fn start(&self) -> String {
        async fn take(
            State(r): State<Receiver>,
            Path(path): Path<String>,
            Json(body): Json<serde_json::Value>,
        ) -> StatusCode {
            let mut fail = r.fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
            r.got.lock().unwrap().push((format!("/{path}"), body));
            StatusCode::OK
        }
        let app = axum::Router::new().route("/{*path}", axum::routing::post(take)).with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        format!("http://{addr}")
    }

    /// Waits up to 10 s for `n` deliveries.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<(String, serde_json::Value)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.got.lock().unwrap().clone();
            if got.len() >= n {
                return got;
            }
            assert!(tokio::time::Instant::now() < deadline, "only {} of {n} alerts arrived: {got:?}", got.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn sample() -> Alert {
    Alert {
        event: AlertKind::KillSwitch,
        text: "kill switch tripped: daily loss 5.1% over 5%".into(),
        at: DateTime::from_timestamp(1_764_000_000, 0).unwrap(),
        details: serde_json::json!({ "equity": 94900.0 }),
    }
}

#[tokio::test]
async fn each_target_gets_its_own_format_and_failures_are_retried() {
    let r = Receiver::default();
    let base = r.start().await;
    let cfg = NotifyConfig {
        webhook_url: Some(url::Url::parse(&format!("{base}/hook")).unwrap()),
        telegram_chat_id: Some("42".into()),
        telegram_api: url::Url::parse(&format!("{base}/tg")).unwrap(),
        discord: true,
        feed_down_mins: 5,
        daily_summary: true,
        timeout_secs: 5,
        retries: 3,
        telegram_commands: false,
        telegram_allowed_chats: Vec::new(),
    };
    let env = |k: &str| match k {
        TELEGRAM_TOKEN_VAR => Some("123:SECRET".to_string()),
        DISCORD_WEBHOOK_VAR => Some(format!("{base}/discord/abc")),
        _ => None,
    };
    let t = targets(&cfg, env).unwrap();
    assert_eq!(t.iter().map(Target::name).collect::<Vec<_>>(), ["webhook", "telegram", "discord"]);
    assert!(!format!("{t:?}").contains("SECRET"), "secrets never print: {t:?}");

    // The first two attempts fail: the webhook gets it at the third.
    *r.fail.lock().unwrap() = 2;
    let (tx, rx) = mpsc::channel(8);
    let policy = Delivery { timeout: Duration::from_secs(5), retries: 3, first_wait: Duration::from_millis(10) };
    tokio::spawn(deliver(rx, t, "paper".into(), policy));
    tx.send(sample()).await.unwrap();
    let got = r.wait_for(3).await;
    assert_eq!(got[0].0, "/hook");
    assert_eq!(got[0].1["event"], "kill_switch");
    assert_eq!(got[0].1["mode"], "paper");
    assert_eq!(got[0].1["text"], "kill switch tripped: daily loss 5.1% over 5%");
    assert_eq!(got[0].1["details"]["equity"], 94900.0);
    assert_eq!(got[0].1["at"], "2025-11-24T16:00:00+00:00");
    assert_eq!(got[1].0, "/tg/bot123:SECRET/sendMessage");
    assert_eq!(got[1].1["chat_id"], "42");
    assert_eq!(got[1].1["text"], "tradebot (paper): kill switch tripped: daily loss 5.1% over 5%");
    assert_eq!(got[2].0, "/discord/abc");
    assert_eq!(got[2].1["content"], "tradebot (paper): kill switch tripped: daily loss 5.1% over 5%");
    assert_eq!(*r.fail.lock().unwrap(), 0);
}

#[tokio::test]
async fn a_target_that_keeps_failing_is_given_up_and_the_next_alert_still_goes() {
    let r = Receiver::default();
    let base = r.start().await;
    let t = vec![Target::Webhook(url::Url::parse(&format!("{base}/hook")).unwrap())];
    // Two retries: three attempts fail, the alert is dropped; the next one arrives.
    *r.fail.lock().unwrap() = 3;
    let (tx, rx) = mpsc::channel(8);
    let policy = Delivery { timeout: Duration::from_secs(5), retries: 2, first_wait: Duration::from_millis(10) };
    tokio::spawn(deliver(rx, t, "live".into(), policy));
    tx.send(sample()).await.unwrap();
    tx.send(Alert { event: AlertKind::FeedBack, text: "market feed back after 7 min".into(), ..sample() })
        .await
        .unwrap();
    let got = r.wait_for(1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1["event"], "feed_back");
}

#[test]
fn a_target_without_its_secret_is_refused_with_the_fix() {
    let cfg = NotifyConfig {
        webhook_url: None,
        telegram_chat_id: Some("42".into()),
        telegram_api: url::Url::parse(crate::config::TELEGRAM_API).unwrap(),
        discord: false,
        feed_down_mins: 5,
        daily_summary: true,
        timeout_secs: 5,
        retries: 3,
        telegram_commands: false,
        telegram_allowed_chats: Vec::new(),
    };
    let e = targets(&cfg, |_| None).unwrap_err().to_string();
    assert!(e.contains(TELEGRAM_TOKEN_VAR) && e.contains("LoadCredential"), "{e}");
    let e = targets(&NotifyConfig { telegram_chat_id: None, discord: true, ..cfg.clone() }, |_| None)
        .unwrap_err()
        .to_string();
    assert!(e.contains(DISCORD_WEBHOOK_VAR), "{e}");
    let bad = |k: &str| (k == DISCORD_WEBHOOK_VAR).then(|| "not a url".to_string());
    assert!(targets(&NotifyConfig { telegram_chat_id: None, discord: true, ..cfg.clone() }, bad).is_err());
    // Off without targets: sending is a no-op.
    let off = Alerts::off();
    assert!(!off.is_on());
    off.send(sample());
    // From systemd's credentials directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(TELEGRAM_TOKEN_VAR), "9:TOKEN\n").unwrap();
    let creds = dir.path().to_str().unwrap().to_string();
    let env = move |k: &str| (k == "CREDENTIALS_DIRECTORY").then(|| creds.clone());
    let t = targets(&cfg, env).unwrap();
    let Target::Telegram { token, .. } = &t[0] else { panic!("{t:?}") };
    assert_eq!(token.expose(), "9:TOKEN");
}

fn notify_to(url: &str, timeout_secs: u64) -> NotifyConfig {
    NotifyConfig {
        webhook_url: Some(url::Url::parse(url).unwrap()),
        telegram_chat_id: None,
        telegram_api: url::Url::parse("http://127.0.0.1:1/").unwrap(),
        discord: false,
        feed_down_mins: 5,
        daily_summary: true,
        timeout_secs,
        retries: 0,
        telegram_commands: false,
        telegram_allowed_chats: Vec::new(),
    }
}

/// Issue 36: a dead webhook's failure names the cause, the whole chain (connection refused to
/// host:port), not reqwest's bare "error sending request"; an alert given up is not "lost" at shutdown.
#[test]
fn a_dead_webhook_is_named_with_its_cause() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = crate::logging::capture::containing(&format!("127.0.0.1:{port}"));
    let cfg = notify_to(&format!("http://127.0.0.1:{port}/hook"), 5);
    let alerts = Alerts::start(targets(&cfg, |_| None).unwrap(), &cfg, "paper", rt.handle());
    alerts.send(sample());
    assert_eq!(alerts.flush(Duration::from_secs(10)), 0, "given up within the wait: nothing lost");
    let lines: Vec<_> = log.lines().into_iter().filter(|(l, _)| *l <= log::Level::Warn).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let (level, line) = &lines[0];
    assert_eq!(*level, log::Level::Warn);
    assert!(line.contains(&format!("not delivered to webhook after 1 attempts: 127.0.0.1:{port}: ")), "{line}");
    assert!(line.to_lowercase().contains("connection refused"), "the cause is missing: {line}");
    assert!(!line.contains("/hook"), "the URL's path stays out (Telegram's holds the token): {line}");
}

/// Issue 36: an alert queued just before exit is waited for (a bounded wait), and one that still has
/// not gone out is logged by name, not dropped without a word.
#[test]
fn an_alert_still_queued_at_shutdown_is_logged_as_lost() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    // A receiver that takes the connection and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let log = crate::logging::capture::containing("lost at shutdown");
    let cfg = notify_to(&format!("http://127.0.0.1:{port}/hook"), 30);
    let alerts = Alerts::start(targets(&cfg, |_| None).unwrap(), &cfg, "paper", rt.handle());
    alerts.send(Alert { text: format!("kill switch tripped ({port})"), ..sample() });
    let started = std::time::Instant::now();
    assert_eq!(alerts.flush(Duration::from_millis(300)), 1);
    assert!(started.elapsed() < Duration::from_secs(5), "the wait is bounded");
    let lines: Vec<String> =
        log.lines().into_iter().map(|(_, l)| l).filter(|l| l.contains(&port.to_string())).collect();
    assert_eq!(
        lines,
        vec![format!(
            "alerts: kill_switch alert lost at shutdown (not delivered within 0.3 s): kill switch tripped ({port})"
        )]
    );
    drop(silent);
}
