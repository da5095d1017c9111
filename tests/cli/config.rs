//! `config check` and the config's exit codes (78 naming the file and key), the live gate, secrets
//! never printed, refused or missing API keys, and a dashboard off loopback.

use super::common::{root, text, write_config};
use super::{config_in, tradebot};

#[test]
fn config_check_passes_on_the_demo_and_masks_secrets() {
    let secret = "SUPERSECRET-7f3a9c";
    let o = tradebot(
        &["config", "check", "config/tradebot.toml"],
        &[("APCA_API_KEY_ID", "PKKEYID-0042"), ("APCA_API_SECRET_KEY", secret), ("RUST_LOG", "trace")],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("trading_url = \"https://paper-api.alpaca.markets/\""), "{out}");
    assert!(out.contains("Alpaca keys: found in environment"), "{out}");
    assert!(!out.contains(secret) && !out.contains("PKKEYID-0042"), "a secret leaked:\n{out}");
}

#[test]
fn out_of_range_config_exits_78_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = config_in(dir.path(), "", "");
    let bad = std::fs::read_to_string(&p).unwrap().replace("max_position_pct = 0.4", "max_position_pct = 1.5");
    std::fs::write(&p, bad).unwrap();
    let o = tradebot(&["config", "check", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}: risk.max_position_pct = 1.5: must be in (0, 1]", p.display())), "{err}");
}

#[test]
fn live_gate_needs_both_config_and_flag() {
    let dir = tempfile::tempdir().unwrap();
    let paper = config_in(dir.path(), "", "");
    let o = tradebot(&["run", "--config", paper.to_str().unwrap(), "--live"], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("--live was given but mode = \"paper\""), "{}", text(&o));

    let live_text = std::fs::read_to_string(root().join("config/alpaca-live.toml.example")).unwrap();
    let live = dir.path().join("live.toml");
    std::fs::write(&live, live_text.replace("/var/lib/tradebot", &dir.path().join("s").display().to_string())).unwrap();
    let o = tradebot(&["run", "--config", live.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("add --live to the command line"), "{}", text(&o));
}

#[test]
fn config_check_output_parses_back_and_a_missing_feed_file_exits_78() {
    let dir = tempfile::tempdir().unwrap();
    let p = config_in(dir.path(), "", "");
    let o = tradebot(&["config", "check", "--config", p.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    // The effective configuration is itself a valid config (the comment line at the end included).
    let effective = dir.path().join("effective.toml");
    std::fs::write(&effective, &o.stdout).unwrap();
    let again = tradebot(&["config", "check", effective.to_str().unwrap()], &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(String::from_utf8_lossy(&again.stdout), String::from_utf8_lossy(&o.stdout));

    let moved = std::fs::read_to_string(&p).unwrap().replace("data/stocks-daily", "data/no-such");
    std::fs::write(&p, moved).unwrap();
    let o = tradebot(&["config", "check", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("feed.file = \"data/no-such-2000-2013.csv.gz\": no such file"), "{}", text(&o));
}

#[test]
fn a_dashboard_off_loopback_without_tls_or_allow_remote_exits_78_naming_the_key_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let p = config_in(dir.path(), "", "");
    let open = std::fs::read_to_string(&p).unwrap().replace("listen = \"127.0.0.1:9187\"", "listen = \"0.0.0.0:9187\"");
    std::fs::write(&p, open).unwrap();
    for args in [&["config", "check", p.to_str().unwrap()][..], &["run", "--config", p.to_str().unwrap()][..]] {
        let o = tradebot(args, &[]);
        assert_eq!(o.status.code(), Some(78), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}: web.listen = \"0.0.0.0:9187\" is not a loopback address", p.display()))
                && err.contains("reverse proxy with TLS")
                && err.contains("web.allow_remote = true"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn refused_api_keys_exit_78_after_an_alert_to_the_notify_targets() {
    use std::sync::{Arc, Mutex};
    use tradebot::alpaca::fake::FakeAlpaca;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
    // The webhook: records what it is sent.
    let got = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(body);
                "ok"
            }
        }),
    );
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        &format!(
            "mode = \"paper\"\nstate_dir = {state:?}\n{alpaca}[market]\nsymbols = [\"AAPL\"]\n[feed]\nkind = \"alpaca\"\n\
             [broker]\nkind = \"alpaca\"\n[strategy]\nmode = \"scripted\"\n[web]\nenabled = false\n\
             [notify]\nwebhook_url = {hook:?}\nretries = 0\n",
            state = dir.path().join("state").display().to_string(),
            alpaca = fake.alpaca_section("v2/iex"),
        ),
    );
    let o = tradebot(
        &["run", "--config", cfg.to_str().unwrap()],
        &[("APCA_API_KEY_ID", "WRONGKEY"), ("APCA_API_SECRET_KEY", "wrong-secret")],
    );
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("Alpaca refused the API keys"), "{}", text(&o));
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "one alert before the exit: {got:?}");
    let alert: serde_json::Value = serde_json::from_str(&got[0]).unwrap();
    assert_eq!(alert["event"], "fatal", "{alert}");
    assert!(alert["text"].as_str().unwrap().contains("Alpaca refused the API keys"), "{alert}");
    assert!(!got[0].contains("wrong-secret"), "a secret in the alert: {}", got[0]);
}

#[test]
fn missing_api_keys_and_a_missing_alert_secret_exit_78_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    // The live runner without keys.
    let p = config_in(dir.path(), "", "");
    let alpaca = std::fs::read_to_string(&p)
        .unwrap()
        .replace("kind = \"replay\"", "kind = \"alpaca\"")
        .replace("kind = \"sim\"", "kind = \"alpaca\"");
    std::fs::write(&p, alpaca).unwrap();
    let o = tradebot(&["run", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: feed.kind / broker.kind = \"alpaca\" needs APCA_API_KEY_ID", p.display())));
    // A Telegram chat without its bot token.
    let p = config_in(dir.path(), "", "");
    let telegram =
        std::fs::read_to_string(&p).unwrap().replace("# telegram_chat_id = \"123456789\"", "telegram_chat_id = \"42\"");
    std::fs::write(&p, telegram).unwrap();
    let o = tradebot(&["run", "--config", p.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("[notify]: notify.telegram_chat_id is set but no bot token"), "{}", text(&o));
}
