//! The bot against a local fake of the Bot API (updates in, messages out, over real HTTP) and a fake
//! daemon on the control channel.

use super::api::Api;
use super::bot::{Bot, RATE};
use crate::config::Secret;
use crate::control::report::PositionStatus;
use crate::control::server::Call;
use crate::control::{Request, Response, StatusReport};
use crate::web::data::{ChartPoint, DashboardData, SharedData};
use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "123:secret";
const ME: i64 = 42;
const STRANGER: i64 = 666;

#[derive(Default)]
struct Fake {
    updates: Vec<Value>,
    sent: Vec<Value>,
    callbacks: Vec<Value>,
}

type Shared = Arc<Mutex<Fake>>;

async fn method(
    State(f): State<Shared>,
    Path((bot, name)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Json<Value> {
    if bot != format!("bot{TOKEN}") {
        return Json(json!({ "ok": false, "error_code": 401, "description": "Unauthorized" }));
    }
    let mut f = f.lock().unwrap();
    match name.as_str() {
        "getUpdates" => {
            let from = body["offset"].as_i64().unwrap_or(0);
            let due: Vec<Value> = f.updates.iter().filter(|u| u["update_id"].as_i64() >= Some(from)).cloned().collect();
            Json(json!({ "ok": true, "result": due }))
        }
        "sendMessage" => {
            f.sent.push(body);
            Json(json!({ "ok": true, "result": { "message_id": f.sent.len(), "chat": { "id": ME } } }))
        }
        "answerCallbackQuery" => {
            f.callbacks.push(body);
            Json(json!({ "ok": true, "result": true }))
        }
        _ => Json(json!({ "ok": false, "error_code": 404, "description": "Not Found" })),
    }
}

struct Rig {
    fake: Shared,
    asked: Arc<Mutex<Vec<Request>>>,
    shutdown: CancellationToken,
    next_id: i64,
}

impl Rig {
    async fn start() -> Rig {
        let fake: Shared = Arc::default();
        let app = Router::new().route("/{bot}/{name}", post(method)).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: url::Url = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        // The daemon: answers every request, remembering it.
        let (tx, mut rx) = mpsc::channel::<Call>(16);
        let asked: Arc<Mutex<Vec<Request>>> = Arc::default();
        let seen = asked.clone();
        tokio::spawn(async move {
            while let Some((req, reply)) = rx.recv().await {
                let answer = format!("{} done", req.name());
                seen.lock().unwrap().push(req);
                let _ = reply.send(Response::done(answer));
            }
        });
        let data = Arc::new(SharedData::new(dashboard()));
        let mut bot = Bot::new(Api::new(&url, Secret::new(TOKEN)), &[ME.to_string()], tx, data);
        bot.poll = Duration::from_millis(0);
        let shutdown = CancellationToken::new();
        tokio::spawn(bot.run(shutdown.clone()));
        Rig { fake, asked, shutdown, next_id: 1 }
    }

    fn message(&mut self, chat: i64, text: &str) {
        let id = self.next_id;
        self.next_id += 1;
        let u = json!({ "update_id": id, "message": { "message_id": id, "chat": { "id": chat }, "text": text } });
        self.fake.lock().unwrap().updates.push(u);
    }

    fn press(&mut self, chat: i64, data: &str) {
        let id = self.next_id;
        self.next_id += 1;
        let u = json!({ "update_id": id, "callback_query": { "id": format!("cb{id}"), "data": data,
            "message": { "message_id": 1, "chat": { "id": chat } } } });
        self.fake.lock().unwrap().updates.push(u);
    }

    /// Waits until `n` messages were sent; returns them all.
    async fn sent(&self, n: usize) -> Vec<Value> {
        for _ in 0..500 {
            let sent = self.fake.lock().unwrap().sent.clone();
            if sent.len() >= n {
                return sent;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("fewer than {n} messages: {:?}", self.fake.lock().unwrap().sent);
    }
}

fn dashboard() -> DashboardData {
    let t = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 21, 0, 0).unwrap();
    let status = StatusReport {
        daemon_running: true,
        mode: "paper".into(),
        activity: "trading".into(),
        equity: 101_234.5,
        cash: 51_234.5,
        pnl_today: -12.345,
        positions: vec![PositionStatus { symbol: "AAPL".into(), qty: 100.0, price: 500.0, value: 50_000.0 }],
        ..Default::default()
    };
    let equity = vec![
        ChartPoint { t: t(1), equity: 90_000.0, buy_hold: 90_000.0 },
        ChartPoint { t: t(20), equity: 100_000.0, buy_hold: 99_000.0 },
        ChartPoint { t: t(26), equity: 101_234.5, buy_hold: 99_500.0 },
    ];
    DashboardData { status, equity, ..Default::default() }
}

fn texts(sent: &[Value]) -> Vec<String> {
    sent.iter().map(|m| m["text"].as_str().unwrap_or("").to_string()).collect()
}

#[tokio::test]
async fn figures_come_from_the_dashboards_data_to_the_cent() {
    let mut rig = Rig::start().await;
    rig.message(ME, "/balance");
    rig.message(ME, "/positions@tradebot_bot");
    rig.message(ME, "/profit 7");
    rig.message(ME, "/profit lots");
    let t = texts(&rig.sent(4).await);
    assert_eq!(t[0], "equity $101234.50\ncash $51234.50\ninvested $50000.00");
    assert_eq!(t[1], "AAPL 100 @ $500.00 = $50000.00");
    // Seven days back from the last point (the 26th) is the 19th: the 20th's point is the first in it.
    assert!(
        t[2].starts_with("last 7 days (2026-11-20 to 2026-11-26): equity $100000.00 to $101234.50 (+$1234.50, +1.23%)"),
        "{}",
        t[2]
    );
    assert!(t[3].contains("/profit lots: give a number of days"), "{}", t[3]);
    assert!(rig.asked.lock().unwrap().is_empty(), "reading asks the daemon nothing");
    assert!(rig.sent(4).await.iter().all(|m| m["chat_id"] == ME));
    rig.shutdown.cancel();
}

#[tokio::test]
async fn a_strangers_chat_is_ignored_and_pause_goes_to_the_daemon() {
    let mut rig = Rig::start().await;
    rig.message(STRANGER, "/pause");
    rig.message(STRANGER, "/status");
    rig.message(ME, "/pause");
    let t = texts(&rig.sent(1).await);
    assert_eq!(t, ["pause done"], "only the allowed chat is answered, with the daemon's answer");
    assert_eq!(*rig.asked.lock().unwrap(), [Request::Pause], "the stranger's /pause never reached the daemon");
    rig.shutdown.cancel();
}

#[tokio::test]
async fn flatten_needs_its_button_and_a_stale_or_foreign_press_does_nothing() {
    let mut rig = Rig::start().await;
    rig.message(ME, "/flatten");
    let sent = rig.sent(1).await;
    assert!(rig.asked.lock().unwrap().is_empty(), "no flatten before the button");
    let row = sent[0]["reply_markup"]["inline_keyboard"][0].as_array().unwrap().clone();
    let yes = row[0]["callback_data"].as_str().unwrap().to_string();
    assert_eq!(row[1]["callback_data"], "cancel");
    rig.press(ME, "flatten:forged");
    rig.sent(2).await;
    assert!(rig.asked.lock().unwrap().is_empty(), "a button that is not the pending one flattens nothing");
    // The forged press used up the pending confirmation: ask again, then press the right button.
    rig.message(ME, "/flatten");
    let sent = rig.sent(3).await;
    let yes2 = sent[2]["reply_markup"]["inline_keyboard"][0][0]["callback_data"].as_str().unwrap().to_string();
    assert_ne!(yes, yes2, "each confirmation has a token of its own");
    rig.press(STRANGER, &yes2);
    rig.press(ME, &yes2);
    let t = texts(&rig.sent(4).await);
    assert_eq!(t[3], "flatten done");
    assert_eq!(*rig.asked.lock().unwrap(), [Request::Flatten]);
    assert_eq!(rig.fake.lock().unwrap().callbacks.len(), 2, "each of our presses is answered");
    rig.shutdown.cancel();
}

#[tokio::test]
async fn more_than_the_rate_a_minute_is_refused_once() {
    let mut rig = Rig::start().await;
    for _ in 0..RATE + 3 {
        rig.message(ME, "/retrain ppo");
    }
    let t = texts(&rig.sent(RATE + 1).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let all = texts(&rig.fake.lock().unwrap().sent);
    assert_eq!(all.len(), RATE + 1, "{all:?}");
    assert!(t[RATE].starts_with("too many commands"), "{t:?}");
    let asked = rig.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), RATE);
    assert!(asked.iter().all(|r| *r == Request::Retrain { kind: Some(crate::models::ModelKind::Ppo) }));
    rig.shutdown.cancel();
}

#[test]
fn commands_parse_with_their_arguments_and_mistakes_are_named() {
    use super::commands::{BotCommand, parse};
    assert_eq!(parse("/profit"), Ok(BotCommand::Profit { days: 7 }));
    assert_eq!(parse("/PROFIT 30"), Ok(BotCommand::Profit { days: 30 }));
    assert_eq!(parse("/retrain"), Ok(BotCommand::Control(Request::Retrain { kind: None })));
    assert!(parse("/retrain svm").unwrap_err().to_string().contains("ppo or lstm"));
    assert!(parse("/sell AAPL").unwrap_err().to_string().contains("/sell is not a command"));
    assert!(parse("hello").unwrap_err().to_string().contains("send /help"));
    assert_eq!(parse("/flatten"), Ok(BotCommand::Flatten));
}

#[test]
fn each_mistake_is_its_own_error_naming_the_fix() {
    use super::commands::{ParseError, parse};
    assert_eq!(parse("hello"), Err(ParseError::NoSlash));
    assert_eq!(parse("/profit 0"), Err(ParseError::Days("0".into())));
    assert_eq!(parse("/retrain svm"), Err(ParseError::Kind("svm".into())));
    assert_eq!(parse("/sell AAPL"), Err(ParseError::Unknown("sell".into())));
    assert!(parse("/profit 0").unwrap_err().to_string().contains("from 1 to 3650"));
}

#[tokio::test]
async fn commands_without_a_telegram_target_are_refused_naming_the_token_variable() {
    let cfg = crate::config::NotifyConfig {
        webhook_url: None,
        telegram_chat_id: None,
        telegram_api: url::Url::parse(crate::config::TELEGRAM_API).unwrap(),
        discord: false,
        feed_down_mins: 5,
        daily_summary: false,
        timeout_secs: 5,
        retries: 3,
        telegram_commands: true,
        telegram_allowed_chats: Vec::new(),
    };
    let (calls, _rx) = mpsc::channel(1);
    let data: Arc<dyn crate::web::data::DashboardSource> = Arc::new(SharedData::default());
    let stop = CancellationToken::new();
    let err = super::start(&cfg, &[], calls, data, &tokio::runtime::Handle::current(), stop).unwrap_err();
    assert!(matches!(err, super::StartError::NoBot), "{err:?}");
    assert!(err.to_string().contains(crate::alerts::TELEGRAM_TOKEN_VAR), "{err}");
}
