//! The chores' thread against a view and an inbox: controls become events for the trading thread, status
//! is answered from the view the trading thread left, the dashboard is published, a promoted model arrives
//! as an event, and the thread ends on the stop token with the host.

use super::*;
use crate::config::Config;
use crate::control::server::Call;
use crate::control::{Request, Response};
use crate::engine::Control;
use crate::env::EnvConfig;
use crate::live::view::{EngineView, TradingView};
use crate::models::Registry;
use crate::policy::tests::{random_ppo, register_ppo};
use crate::policy::{ModelSel, Pipeline, PpoPolicy, SessionOptions};
use crate::web::data::DashboardSource;
use std::collections::BTreeMap;
use std::time::Instant;
use tokio::sync::oneshot;

fn config(dir: &std::path::Path) -> Config {
    let text = format!(
        "mode = \"paper\"\nstate_dir = \"{}\"\n[market]\nsymbols = [\"AAPL\", \"MSFT\"]\ntimeframe = \"1Day\"\n[web]\nenabled = false\n",
        dir.join("state").display()
    );
    Config::parse(&dir.join("tradebot.toml"), &text).unwrap()
}

/// The next event in the inbox, waiting up to 10 s.
fn next(rx: &mut mpsc::Receiver<Event>) -> Event {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(ev) = rx.try_recv() {
            return ev;
        }
        assert!(Instant::now() < deadline, "no event reached the engine's inbox");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The day of the bar in the test's CSV, as stored.
fn csv_day() -> chrono::DateTime<chrono::Utc> {
    crate::data::daily_bar_time(chrono::NaiveDate::from_ymd_opt(2030, 1, 2).unwrap())
}

fn call(calls: &mpsc::Sender<Call>, req: Request) -> Response {
    let (tx, rx) = oneshot::channel();
    calls.blocking_send((req, tx)).unwrap();
    rx.blocking_recv().unwrap()
}

#[test]
fn controls_become_events_status_comes_from_the_view_and_a_model_arrives_as_an_event() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let (calls_tx, calls_rx) = mpsc::channel(16);
    let host = crate::daemon::test_host(&config, &rt, Some(calls_rx));
    let dashboard = host.dashboard.clone();
    let store = host.store.clone();
    let view = TradingView {
        engine: EngineView {
            account: crate::daemon::host::Balance { equity: 1234.5, cash: 34.5 },
            ..Default::default()
        },
        ready: true,
        bars_received: 7,
        last_bar: BTreeMap::new(),
    };
    let (views_tx, views_rx) = watch::channel(view);
    let (inbox_tx, mut inbox) = mpsc::channel(16);
    let stop = CancellationToken::new();
    let thread =
        spawn(host, views_rx, Inbox(inbox_tx.clone()), CalendarSlot::default(), store.clone(), stop.clone()).unwrap();

    // Pause and flatten are events for the trading thread, in order; the socket gets its answer at once.
    assert!(call(&calls_tx, Request::Pause).ok);
    assert_eq!(next(&mut inbox), Event::Control(Control::Pause));
    assert!(call(&calls_tx, Request::Flatten).ok);
    assert_eq!(next(&mut inbox), Event::Control(Control::Flatten));

    // Status is the view the trading thread left last: its account, its pause.
    let mut paused = views_tx.borrow().clone();
    paused.engine.paused = true;
    paused.engine.account.equity = 1200.25;
    // The engine's outcome of the flatten: every sell went out.
    paused.engine.flatten =
        Some(crate::control::report::FlattenStatus { seq: 1, sent: vec!["AAPL".into()], ..Default::default() });
    views_tx.send_replace(paused);
    let st = call(&calls_tx, Request::Status).status.expect("a status report");
    assert_eq!((st.equity, st.cash, st.risk.paused), (1200.25, 34.5, true));
    assert!(st.activity.starts_with("flattened and paused"), "{}", st.activity);
    // The dashboard is published from the same view.
    let deadline = Instant::now() + Duration::from_secs(10);
    while dashboard.snapshot().status.equity != 1200.25 {
        assert!(Instant::now() < deadline, "the dashboard never showed the view");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Issue 37: `risk clear` reaches the engine as an update when the account's kill switch is tripped,
    // and says so when it is not; snapshots and an import are answered from threads of their own.
    let r = call(&calls_tx, Request::RiskClear { who: "ana".into() });
    assert!(r.ok && r.message.as_deref().unwrap_or("").contains("was not tripped"), "{r:?}");
    let mut loss = crate::risk::DailyLoss::open(&store, 0.05, crate::config::KillSwitchAction::Halt).unwrap();
    loss.trip(crate::clock::now(), "tripped by the test", rust_decimal::Decimal::ONE_HUNDRED).unwrap();
    let r = call(&calls_tx, Request::RiskClear { who: "ana".into() });
    assert!(r.message.as_deref().unwrap_or("").starts_with("kill switch cleared by ana"), "{r:?}");
    let Event::Update(Update::ClearKill { who, .. }) = next(&mut inbox) else { panic!("not a kill switch clear") };
    assert_eq!(who, "ana");
    for account in [false, true] {
        let snap = call(&calls_tx, Request::Snapshot { account }).path.expect("a snapshot's directory");
        let read = crate::store::snapshot::open_snapshot(&snap).unwrap();
        assert!(crate::risk::stored_state(&read).unwrap().0.is_some(), "the engine clears it, not the host");
        drop(read);
        assert!(!snap.exists(), "the reader removed its snapshot");
    }
    let csv = dir.path().join("bars.csv");
    std::fs::write(&csv, "Date,Open,High,Low,Close,Volume\n2030-01-02,10,11,9,10.5,1000\n").unwrap();
    let import = |file: std::path::PathBuf| Request::Import {
        file,
        symbols: Vec::new(),
        symbol: Some("AAPL".into()),
        timeframe: "1Day".into(),
        date_format: None,
    };
    let r = call(&calls_tx, import(csv.clone()));
    assert_eq!(r.import.as_ref().map(|i| (i.new_bars, i.rows.get("AAPL").copied())), Some((1, Some(1))), "{r:?}");
    assert_eq!(
        store
            .bars(&crate::domain::Symbol::new("AAPL").unwrap(), crate::domain::Timeframe::DAY1, csv_day(), csv_day())
            .unwrap()
            .len(),
        1
    );
    let r = call(&calls_tx, import("bars.csv".into()));
    assert!(!r.ok && r.error.as_deref().unwrap_or("").contains("absolute path"), "{r:?}");

    // A promoted model is loaded off the trading thread and arrives once, as an event.
    let reg = Registry::open(&dir.path().join("models")).unwrap();
    let pl = Pipeline::new(&config.features, &config.market.symbols, config.market.timeframe);
    let m = register_ppo(&reg, &pl, &random_ppo(&pl, 3), &EnvConfig::default());
    let sel = ModelSel::Id(m.id.clone());
    let load = move || PpoPolicy::load(&reg, &sel, &pl, SessionOptions::default()).ok().map(LoadedModel::Ppo);
    Inbox(inbox_tx).swap(Box::new(load));
    let Event::Update(Update::Model(swap)) = next(&mut inbox) else { panic!("not a model update") };
    let Some(LoadedModel::Ppo(p)) = swap.clone().take() else { panic!("no PPO model in the update") };
    assert_eq!(p.id(), m.id);
    assert!(swap.take().is_none(), "a model is taken once");

    stop.cancel();
    let host = thread.join().unwrap();
    assert_eq!(host.live.bars_received, 7);
}
