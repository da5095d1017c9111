//! Issue 37: the dashboard links the account report and the last backtest's tear sheet, behind the same
//! token; the search page follows the event stream instead of reloading itself.

use super::{TOKEN, client, data, start};
use crate::backtest::account::tests::{config, sample};
use crate::control::{Request, Response as ControlResponse};
use crate::store::Store;
use crate::web::*;

/// A dashboard with a daemon's config (state under `state`) and controls answered by the test.
async fn start_with_reports(
    state: &Path,
) -> (String, CancellationToken, tokio::sync::mpsc::Receiver<crate::control::server::Call>) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let state = WebState::new(Arc::new(Metrics::new()), Arc::new(SharedData::new(data())), Secret::new(TOKEN), true)
        .with_control(tx)
        .with_reports(config(state));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, state, listen::Limits::default(), stop.clone()));
    (url, stop, rx)
}

/// The JSON a tear sheet embeds.
fn embedded(html: &str) -> serde_json::Value {
    let open = r#"<script type="application/json" id="report">"#;
    let at = html.find(open).expect("the report's JSON in the page") + open.len();
    serde_json::from_str(&html[at..at + html[at..].find("</script>").unwrap()]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_report_and_the_last_backtest_are_pages_of_the_dashboard_behind_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let account = Store::open(&dir.path().join("replay")).unwrap();
    sample(&account);
    let (url, stop, mut calls) = start_with_reports(dir.path()).await;
    let c = client();
    // The daemon's part: a read snapshot of its account store, each time it is asked.
    let daemon = tokio::spawn(async move {
        let mut asked = Vec::new();
        for _ in 0..3 {
            let (req, reply) = calls.recv().await.unwrap();
            let snap = account.snapshot().unwrap();
            asked.push((req, snap.clone()));
            let _ = reply.send(ControlResponse::snapshot(snap));
        }
        asked
    });
    for path in ["/report", "/report?from=2012-03-01", "/report/backtest"] {
        let r = c.get(format!("{url}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
    let html = c.get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"<form id="report-form" method="get" action="/report">"#), "{html}");
    assert!(html.contains(r#"id="no-backtest""#) && !html.contains("backtest-report"), "no tear sheet yet");

    let r = c.get(format!("{url}/report?from=2012-03-01&to=2012-03-05")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let sheet = r.text().await.unwrap();
    assert!(sheet.contains("<h1>The replay account, 2012-03-01 to 2012-03-05</h1>"), "{sheet}");
    let j = embedded(&sheet);
    assert_eq!((j["bars"].as_u64(), j["fills"].as_u64()), (Some(3), Some(1)), "{j}");
    assert_eq!((j["notional"].as_f64(), j["fees"].as_f64()), (Some(500.0), Some(0.5)), "{j}");
    assert!(sheet.contains("Trades (1 fills)") && !sheet.contains("http-equiv"), "{sheet}");
    // The empty fields of the form: the whole history (the sell of the 9th too).
    let r = c.get(format!("{url}/report?from=&to=")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(embedded(&r.text().await.unwrap())["fills"], 2);
    // A bad day and a period without decisions: a page that says why, with its status.
    let r = c.get(format!("{url}/report?from=5.3.2012")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("from=&quot;5.3.2012&quot; is not a day: write YYYY-MM-DD"));
    let r = c.get(format!("{url}/report?from=2013-01-01")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("no decisions from 2013-01-01"));

    let r = c.get(format!("{url}/report/backtest")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("tradebot backtest --report FILE.html"));
    crate::backtest::tearsheet::keep_latest(dir.path(), "<!doctype html><title>bt</title><h1>Backtest of ppo-x</h1>");
    let r = c.get(format!("{url}/report/backtest")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("<h1>Backtest of ppo-x</h1>"));
    let html = c.get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"<a id="backtest-report" href="/report/backtest">"#), "{html}");
    stop.cancel();
    // One snapshot for each report built: none for the refused ones.
    let asked = tokio::time::timeout(std::time::Duration::from_secs(10), daemon).await.unwrap().unwrap();
    for (req, snap) in asked {
        assert_eq!(req, Request::Snapshot { account: true });
        assert!(!snap.exists(), "the report removed the snapshot it read: {}", snap.display());
    }
}

#[tokio::test]
async fn the_search_page_follows_the_event_stream_and_no_page_reloads_itself() {
    let (url, stop) = start(true).await;
    let c = client();
    let page = c.get(format!("{url}/search")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(!page.contains("http-equiv"), "the search page must not reload itself: {page}");
    assert!(page.contains(r#"new EventSource("/api/v1/events")"#) && page.contains("/api/v1/search"), "{page}");
    let v: serde_json::Value =
        c.get(format!("{url}/api/v1/search")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    let studies = v["html"].as_str().unwrap();
    assert_eq!(studies, search::studies(&data().studies));
    assert!(page.contains(&format!(r#"<div id="studies">{studies}</div>"#)), "the page is the same rendering");
    assert_eq!(c.get(format!("{url}/api/v1/search")).send().await.unwrap().status(), 401);
    let dash = c.get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(!dash.contains("http-equiv"), "the dashboard must not reload itself");
    stop.cancel();
}
