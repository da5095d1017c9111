use super::*;
use crate::domain::Timeframe;
use chrono::NaiveDate;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(Path::new("config/x.toml"), text)
}

const MIN: &str = "[market]\nsymbols = [\"AAPL\"]\n";

#[test]
fn minimal_config_gets_real_alpaca_defaults() {
    let c = parse(MIN).unwrap();
    assert_eq!(c.mode, Mode::Paper);
    assert_eq!(c.alpaca.trading_url.as_str(), "https://paper-api.alpaca.markets/");
    assert_eq!(c.alpaca.data_url.as_str(), "https://data.alpaca.markets/");
    assert_eq!(c.alpaca.stream_url.as_str(), "wss://stream.data.alpaca.markets/v2/iex");
    assert_eq!(c.alpaca.trade_updates_url.as_str(), "wss://paper-api.alpaca.markets/stream");
    assert_eq!(c.broker.kind, BrokerKind::Sim);
    assert_eq!(c.market.timeframe, Timeframe::DAY1);
}

#[test]
fn out_of_range_names_file_key_value_and_range() {
    let e = parse(&format!("{MIN}[risk]\nmax_position_pct = 1.5\n")).unwrap_err();
    assert_eq!(e.to_string(), "config/x.toml: risk.max_position_pct = 1.5: must be in (0, 1]");
}

#[test]
fn every_problem_is_reported_at_once() {
    let e = parse("mode = \"yolo\"\n[market]\nsymbols = [\"AAPL\", \"aapl\", \"BAD SYM\"]\ntimeframe = \"7Sec\"\n[broker]\nfee_bps = -1\ninitial_cash = \"0\"\n").unwrap_err();
    let text = e.to_string();
    for needle in [
        "mode = \"yolo\": must be one of \"paper\", \"live\"",
        "market.symbols: \"aapl\" is listed twice",
        "market.symbols: symbol \"BAD SYM\"",
        "market.timeframe = \"7Sec\"",
        "broker.fee_bps = -1: must be in [0, 1000]",
        "broker.initial_cash = \"0\"",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(text.lines().all(|l| l.starts_with("config/x.toml: ")));
}

#[test]
fn unknown_keys_are_refused_with_their_name() {
    let e = parse(&format!("{MIN}[risk]\nmax_positon_pct = 0.1\n")).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("config/x.toml: "), "{text}");
    assert!(text.contains("max_positon_pct"), "{text}");
}

#[test]
fn paper_and_live_hosts_cannot_be_mixed() {
    let e = parse(&format!("{MIN}[alpaca]\ntrading_url = \"https://api.alpaca.markets\"\n")).unwrap_err();
    assert!(e.to_string().contains("that is the live host but mode = \"paper\""), "{e}");
    let e = parse(&format!("mode = \"live\"\n{MIN}[broker]\nkind = \"sim\"\n")).unwrap_err();
    assert!(e.to_string().contains("needs broker.kind = \"alpaca\""), "{e}");
    let c = parse(&format!("mode = \"live\"\n{MIN}[broker]\nkind = \"alpaca\"\n")).unwrap();
    assert_eq!(c.alpaca.trading_url.as_str(), "https://api.alpaca.markets/");
    // The order-updates stream too: a paper config listening to the live account's orders is refused.
    let e = parse(&format!("{MIN}[alpaca]\ntrade_updates_url = \"wss://api.alpaca.markets/stream\"\n")).unwrap_err();
    assert!(e.to_string().contains("alpaca.trade_updates_url") && e.to_string().contains("live host"), "{e}");
    let live = "mode = \"live\"\n";
    let e = parse(&format!(
        "{live}{MIN}[broker]\nkind = \"alpaca\"\n[alpaca]\ntrade_updates_url = \"wss://paper-api.alpaca.markets/stream\"\n"
    ))
    .unwrap_err();
    assert!(e.to_string().contains("alpaca.trade_updates_url") && e.to_string().contains("paper host"), "{e}");
}

#[test]
fn stream_urls_need_ws_schemes() {
    let e = parse(&format!("{MIN}[alpaca]\nstream_url = \"https://x.example\"\n")).unwrap_err();
    assert!(e.to_string().contains("alpaca.stream_url = \"https://x.example\": scheme \"https\""), "{e}");
}

#[test]
fn shipped_configs_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["config/tradebot.toml", "config/alpaca-paper.toml", "config/alpaca-live.toml.example"] {
        let c = Config::load(&root.join(f)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.market.symbols.is_empty(), "{f}");
    }
}

#[test]
fn credentials_from_env_then_directory() {
    let env = |k: &str| match k {
        KEY_ID_VAR => Some("PKID".to_string()),
        SECRET_KEY_VAR => Some("s3cret".to_string()),
        _ => None,
    };
    let c = Credentials::load_from(env).unwrap().unwrap();
    assert_eq!(c.key_id.expose(), "PKID");
    assert!(!format!("{c:?}").contains("s3cret"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(KEY_ID_VAR), "PKFILE\n").unwrap();
    let d = dir.path().to_string_lossy().to_string();
    let env = |k: &str| (k == "CREDENTIALS_DIRECTORY").then(|| d.clone());
    let e = Credentials::load_from(env).unwrap_err().to_string();
    assert!(e.contains("holds only one of"), "{e}");
    std::fs::write(dir.path().join(SECRET_KEY_VAR), "sfile\n").unwrap();
    let c = Credentials::load_from(env).unwrap().unwrap();
    assert_eq!((c.key_id.expose(), c.secret_key.expose()), ("PKFILE", "sfile"));

    let half = |k: &str| (k == KEY_ID_VAR).then(|| "x".to_string());
    assert!(Credentials::load_from(half).is_err());
    assert!(Credentials::load_from(|_| None).unwrap().is_none());
}

#[test]
fn features_and_env_sections_are_parsed_and_checked() {
    let c = parse(MIN).unwrap();
    assert_eq!(c.features, crate::features::FeatureSpec::default());
    // The env charges what the simulated broker charges unless told otherwise.
    assert_eq!((c.env.exec.fee_bps, c.env.exec.slippage_bps), (c.broker.fee_bps, c.broker.slippage_bps));
    let c = parse(&format!(
        "{MIN}[features]\nreturn_horizons = [1, 3]\nrsi_period = 7\n[env]\nn_envs = 8\ntrailing_stop_pct = 0.08\ncooldown_bars = 5\nbuy_cap = \"before-fees\"\naccounting = \"finrl-numpy\"\nturbulence_threshold = 99\n"
    ))
    .unwrap();
    assert_eq!((c.features.return_horizons.clone(), c.features.rsi_period), (vec![1, 3], 7));
    assert_eq!((c.env.n_envs, c.env.exec.trailing_stop, c.env.exec.cooldown_bars), (8, 0.08, 5));
    assert!(c.env.exec.cash_cap_ignores_fees);
    assert_eq!(c.env.accounting, crate::env::Accounting::FinrlNumpy);
    assert_eq!(c.env.turbulence_threshold, Some(99.0));
    let e = parse(&format!(
        "{MIN}[features]\nmacd_fast = 40\nvol_windows = [1]\n[env]\ntrailing_stop_pct = 1.5\nn_envs = 0\nbuy_cap = \"x\"\n"
    ))
    .unwrap_err()
    .to_string();
    for needle in [
        "features.macd_fast = 40: must be below macd_slow",
        "features.vol_windows = 1: must be in [2, 10000]",
        "env.trailing_stop_pct = 1.5: must be in [0, 1)",
        "env.n_envs = 0: must be a whole number in [1, 1048576]",
        "env.buy_cap = \"x\": must be one of \"after-fees\", \"before-fees\"",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
    assert!(parse(&format!("{MIN}[env]\nhmax = 3\n")).is_err(), "unknown keys are refused");
}

#[test]
fn train_ppo_and_lstm_sections_are_parsed_and_checked() {
    let c = parse(&format!(
        "{MIN}[train]\nfrom = \"2001-01-01\"\nholdout_from = \"2011-01-01\"\n[ppo]\nhidden = [64, 64]\n[lstm]\npatience = 7\n"
    ))
    .unwrap();
    assert_eq!(c.train.train_end(), NaiveDate::from_ymd_opt(2010, 12, 31));
    assert_eq!(c.ppo.hidden, vec![64, 64]);
    assert_eq!(c.lstm.patience, 7);
    assert_eq!(c.train.checkpoint_every, 10);

    let e = parse(&format!(
        "{MIN}[train]\nto = \"2011-06-01\"\nholdout_from = \"2011-01-01\"\n[ppo]\ngamma = 1.5\n[lstm]\nbatch_size = 1\n"
    ))
    .unwrap_err()
    .to_string();
    for needle in [
        "train.to = 2011-06-01 is not before train.holdout_from = 2011-01-01",
        "ppo.gamma must be in (0, 1]",
        "lstm.batch_size must be at least 2",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
    let e = parse(&format!("{MIN}[ppo]\nhiden = [3]\n")).unwrap_err().to_string();
    assert!(e.contains("hiden"), "{e}");
}

#[test]
fn retrain_section_defaults_and_errors() {
    let c = parse(MIN).unwrap();
    assert!(c.retrain.enabled);
    assert_eq!(c.retrain.schedule.spec(), "0 2 * * Sat");
    assert_eq!(c.retrain.schedule.zone(), chrono_tz::America::New_York);
    assert_eq!(c.retrain.gate.min_trades, 5);
    let e = parse(&format!("{MIN}[retrain]\nschedule = \"0 2 * Sat\"\ntimezone = \"Nowhere\"\nmax_drawdown = 0\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("retrain.schedule / retrain.timezone"), "{e}");
    assert!(e.contains("retrain.max_drawdown = 0"), "{e}");
}

#[test]
fn a_rolling_train_window_resolves_on_the_day_and_refuses_fixed_dates_with_it() {
    let c = parse(&format!("{MIN}[train]\nwindow_days = 365\nholdout_days = 30\n")).unwrap();
    assert_eq!(c.train.rolling, Some(Rolling { window_days: 365, holdout_days: 30 }));
    let d = |y, m, day| NaiveDate::from_ymd_opt(y, m, day);
    let t = c.train.resolve(d(2024, 6, 30).unwrap());
    assert_eq!((t.holdout_from, t.holdout_to), (d(2024, 6, 1), d(2024, 6, 30)), "30 days ending on the day");
    assert_eq!((t.from, t.to), (d(2023, 6, 2), d(2024, 5, 31)), "365 days before the holdout");
    assert_eq!(t.train_end(), d(2024, 5, 31));
    assert!(t.rolling.is_none());
    // A week later, the window has moved a week.
    assert_eq!(c.train.resolve(d(2024, 7, 7).unwrap()).to, d(2024, 6, 7));
    // Fixed dates resolve to themselves.
    let fixed = parse(&format!("{MIN}[train]\nfrom = \"2001-01-01\"\nto = \"2005-01-01\"\n")).unwrap();
    assert_eq!(fixed.train.resolve(d(2024, 1, 1).unwrap()), fixed.train);
    // Holdout defaults to 182 days.
    let h = parse(&format!("{MIN}[train]\nwindow_days = 1000\n")).unwrap();
    assert_eq!(h.train.rolling.unwrap().holdout_days, 182);

    let e = parse(&format!("{MIN}[train]\nwindow_days = 365\nfrom = \"2001-01-01\"\n")).unwrap_err().to_string();
    assert!(e.contains("use either window_days"), "{e}");
    let e = parse(&format!("{MIN}[train]\nholdout_days = 30\n")).unwrap_err().to_string();
    assert!(e.contains("train.holdout_days needs train.window_days"), "{e}");
    let e = parse(&format!("{MIN}[train]\nwindow_days = 5\n")).unwrap_err().to_string();
    assert!(e.contains("at least 30 days"), "{e}");
}

#[test]
fn notify_targets_are_checked_and_round_trip_through_the_effective_config() {
    let c = parse(
        "[market]\nsymbols = [\"AAPL\"]\n[notify]\nwebhook_url = \"https://hooks.example.com/t\"\ntelegram_chat_id = \" 42 \"\ndiscord = true\nfeed_down_mins = 0\nretries = 1\n",
    )
    .unwrap();
    assert_eq!(c.notify.webhook_url.as_ref().map(|u| u.as_str()), Some("https://hooks.example.com/t"));
    assert_eq!((c.notify.telegram_chat_id.as_deref(), c.notify.discord), (Some("42"), true));
    assert_eq!((c.notify.feed_down_mins, c.notify.retries, c.notify.timeout_secs), (0, 1, 10));
    assert_eq!(c.notify.telegram_api.as_str(), "https://api.telegram.org/");
    let again = parse(&c.to_toml()).unwrap();
    assert_eq!(again.notify, c.notify);
    // The defaults: no target.
    let none = parse("[market]\nsymbols = [\"AAPL\"]\n").unwrap().notify;
    assert!(crate::alerts::targets(&none, |_| None).unwrap().is_empty());
    let e = parse("[market]\nsymbols = [\"AAPL\"]\n[notify]\nwebhook_url = \"ftp://x/y\"\ntimeout_secs = 0\ntelegram_token = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("telegram_token"), "a secret key in the file is refused as unknown: {e}");
    let e = parse("[market]\nsymbols = [\"AAPL\"]\n[notify]\nwebhook_url = \"ftp://x/y\"\ntimeout_secs = 0\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("notify.webhook_url") && e.contains("notify.timeout_secs = 0"), "{e}");
    // The bot's commands: off by default; the allowed chats default to the alerts' chat.
    assert!(!c.notify.telegram_commands && c.notify.telegram_allowed_chats == ["42"]);
    let bot = parse("[market]\nsymbols = [\"AAPL\"]\n[notify]\ntelegram_chat_id = \"42\"\ntelegram_commands = true\ntelegram_allowed_chats = [\"7\", \" 8 \"]\n")
        .unwrap();
    assert_eq!(bot.notify.telegram_allowed_chats, ["7", "8"]);
    assert_eq!(parse(&bot.to_toml()).unwrap().notify, bot.notify);
    let e = parse("[market]\nsymbols = [\"AAPL\"]\n[notify]\ntelegram_commands = true\n").unwrap_err().to_string();
    assert!(e.contains("notify.telegram_commands = true needs the bot's chat: set notify.telegram_chat_id"), "{e}");
}

#[test]
fn a_dashboard_off_loopback_needs_allow_remote_and_its_limits_are_bounded() {
    let e = parse(&format!("{MIN}[web]\nlisten = \"0.0.0.0:9187\"\n")).unwrap_err().to_string();
    assert!(
        e.starts_with("config/x.toml: web.listen = \"0.0.0.0:9187\" is not a loopback address")
            && e.contains("reverse proxy with TLS")
            && e.contains("web.allow_remote = true"),
        "{e}"
    );
    // Said so: accepted, with the WARN the daemon logs at start.
    let c = parse(&format!("{MIN}[web]\nlisten = \"0.0.0.0:9187\"\nallow_remote = true\n")).unwrap();
    assert!(c.web.allow_remote && c.web.remote_warning().is_some_and(|w| w.contains("plain HTTP")));
    // Loopback (either family) and a disabled listener need nothing.
    for ok in ["listen = \"[::1]:9187\"", "enabled = false\nlisten = \"0.0.0.0:9187\""] {
        let c = parse(&format!("{MIN}[web]\n{ok}\n")).unwrap();
        assert!(c.web.remote_warning().is_none(), "{ok}");
    }
    let c = parse(MIN).unwrap();
    assert_eq!((c.web.max_connections, c.web.header_timeout_secs), (256, 10));
    let e = parse(&format!("{MIN}[web]\nmax_connections = 0\nheader_timeout_secs = 100000\n")).unwrap_err().to_string();
    assert!(e.contains("web.max_connections = 0: must be a whole number in [1, 4096]"), "{e}");
    assert!(e.contains("web.header_timeout_secs = 100000: must be a whole number in [1, 300]"), "{e}");
    // The effective configuration keeps the new keys.
    let c = parse(&format!("{MIN}[web]\nmax_connections = 64\nheader_timeout_secs = 5\n")).unwrap();
    assert_eq!(parse(&c.to_toml()).unwrap().web, c.web);
}

#[test]
fn every_duration_size_and_count_has_a_bound_named_with_its_value() {
    // The stale check cannot be turned off by a huge age: a week live (two bars of a weekly timeframe),
    // ten years on paper (fakes stream historic bars).
    let live = "mode = \"live\"\n[broker]\nkind = \"alpaca\"\n";
    let e = parse(&format!("{live}{MIN}[risk]\nmax_bar_age_secs = 604801\n")).unwrap_err().to_string();
    assert!(e.contains("risk.max_bar_age_secs = 604801: at most 604800 in live mode (7 days)"), "{e}");
    assert!(parse(&format!("{live}{MIN}[risk]\nmax_bar_age_secs = 604800\n")).is_ok());
    let weekly = parse(&format!("{live}[market]\nsymbols = [\"AAPL\"]\ntimeframe = \"1Week\"\n")).unwrap();
    assert_eq!(weekly.risk.max_bar_age.as_secs(), 2 * 7 * 86_400, "a weekly timeframe's default stays valid");
    let e = parse(&format!("{MIN}[risk]\nmax_bar_age_secs = 315360001\n")).unwrap_err().to_string();
    assert!(e.contains("risk.max_bar_age_secs = 315360001: at most 315360000 in paper mode"), "{e}");
    // u64::MAX, as a user wrote it: refused whichever part refuses it.
    assert!(parse(&format!("{MIN}[risk]\nmax_bar_age_secs = 18446744073709551615\n")).is_err());

    let e = parse("state_dir = \"\"\n[market]\nsymbols = [\"AAPL\"]\n").unwrap_err().to_string();
    assert!(e.contains("config/x.toml: state_dir = \"\": must name a directory"), "{e}");
    let e = parse(&format!("{MIN}[env]\nmin_order = 0\n")).unwrap_err().to_string();
    assert!(e.contains("env.min_order = 0: must be in (0, 1000000000]"), "{e}");

    let e = parse(&format!(
        "{MIN}[notify]\nfeed_down_mins = 100000\n[retrain]\ngpu_memory_mb = 99999999999\nmemory_mb = 99999999999\nppo_steps = 0\nlstm_epochs = 1000000\nmin_trades = 9999999\n[train]\ncheckpoint_every = 0\nwindow_days = 99999\n"
    ))
    .unwrap_err()
    .to_string();
    for needle in [
        "notify.feed_down_mins = 100000: must be a whole number in [0, 10080]",
        "retrain.gpu_memory_mb = 99999999999: must be a whole number in [0, 1048576]",
        "retrain.memory_mb = 99999999999: must be a whole number in [0, 16777216] (or omit it)",
        "retrain.ppo_steps = 0: must be a whole number in [1, 10000000000] (or omit it)",
        "retrain.lstm_epochs = 1000000: must be a whole number in [1, 100000] (or omit it)",
        "retrain.min_trades = 9999999: must be a whole number in [0, 1000000]",
        "train.checkpoint_every = 0: must be a whole number in [1, 1000000]",
        "train.window_days = 99999, train.holdout_days = 182: use at most 36500 days",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
    assert!(e.lines().all(|l| l.starts_with("config/x.toml: ")), "{e}");
    for (section, needle) in [
        ("[ppo]\nn_steps = 100000000\n", "ppo.n_steps = 100000000: must be a whole number in [1, 1048576]"),
        ("[ppo]\nhidden = [1000000]\n", "ppo.hidden (widest layer) = 1000000: must be a whole number in [1, 65536]"),
        ("[ppo]\nn_epochs = 5000\n", "ppo.n_epochs = 5000: must be a whole number in [1, 1000]"),
        ("[lstm]\nmax_epochs = 10000000\n", "lstm.max_epochs = 10000000: must be a whole number in [1, 100000]"),
        ("[lstm]\nbatch_size = 100000000\n", "lstm.batch_size = 100000000: must be a whole number in [2, 16777216]"),
        ("[tune]\nparallel = 1000\n", "tune.parallel = 1000: must be a whole number in [1, 256]"),
        ("[tune]\ntrials = 10000000\n", "tune.trials = 10000000: must be a whole number in [1, 100000]"),
    ] {
        let e = parse(&format!("{MIN}{section}")).unwrap_err().to_string();
        assert_eq!(e, format!("config/x.toml: {needle}"), "{section}");
    }
}

#[test]
fn the_store_cache_is_bounded_and_small_by_default() {
    assert_eq!(parse(MIN).unwrap().store.cache_mb, 64, "not sled's 1 GiB");
    assert_eq!(parse(&format!("{MIN}[store]\ncache_mb = 256\n")).unwrap().store.cache_mb, 256);
    let e = parse(&format!("{MIN}[store]\ncache_mb = 100000\n")).unwrap_err();
    assert_eq!(e.to_string(), "config/x.toml: store.cache_mb = 100000: must be in [8, 16384]");
}

#[test]
fn a_value_of_the_wrong_type_names_the_key_the_value_and_an_example() {
    let e = parse(&format!("{MIN}[risk]\nmax_position_pct = \"forty\"\n")).unwrap_err().to_string();
    assert!(e.starts_with("config/x.toml: risk.max_position_pct = \"forty\" (line 4): "), "{e}");
    assert!(e.contains("a number is expected (a fraction: 0.4 means 40%)"), "{e}");
    assert!(e.contains("e.g. max_position_pct = 0.25"), "the default as the example: {e}");
    assert!(!e.contains("f64") && !e.contains("invalid type"), "Rust's words: {e}");
    // Money is a decimal string: a bare number is told to be quoted, with its own value.
    let e = parse(&format!("{MIN}[broker]\ninitial_cash = 100000\n")).unwrap_err().to_string();
    assert!(e.contains("broker.initial_cash = 100000 (line 4)"), "{e}");
    assert!(e.contains("write it in quotes: initial_cash = \"100000\""), "{e}");
    // A number for a text key that is not a decimal: its example, not "quote the number".
    let e = parse(&format!("mode = 5\n{MIN}")).unwrap_err().to_string();
    assert!(
        e.contains("mode = 5 (line 1): a number where text in double quotes is expected; e.g. mode = \"paper\""),
        "{e}"
    );
    let e = parse(&format!("{MIN}[retrain]\nenabled = \"yes\"\n")).unwrap_err().to_string();
    assert!(e.contains("retrain.enabled = \"yes\"") && e.contains("true or false is expected"), "{e}");
    let e = parse(&format!("{MIN}[ppo]\nn_steps = -5\n")).unwrap_err().to_string();
    assert!(e.contains("ppo.n_steps = -5") && e.contains("a whole number"), "{e}");
}

#[test]
fn a_misspelt_key_is_answered_with_the_closest_valid_one() {
    let e = parse(&format!("{MIN}[broker]\ninitial_cahs = \"5000\"\n")).unwrap_err().to_string();
    assert_eq!(e, "config/x.toml: broker.initial_cahs (line 4): unknown key in [broker]; did you mean `initial_cash`?");
    let e = parse(&format!("stat_dir = \"/x\"\n{MIN}")).unwrap_err().to_string();
    assert!(e.contains("stat_dir (line 1): unknown key at the top level; did you mean `state_dir`?"), "{e}");
    // Nothing close: the keys of the section, not a guess.
    let e = parse(&format!("{MIN}[broker]\nbananas = 1\n")).unwrap_err().to_string();
    assert!(
        e.contains("broker.bananas (line 4): unknown key in [broker]; the keys there are kind, initial_cash"),
        "{e}"
    );
    assert_eq!(
        super::explain::closest("max_positon_pct", &["max_position_pct", "max_order_notional"]),
        Some("max_position_pct")
    );
    assert_eq!(super::explain::closest("zzz", &["max_position_pct"]), None);
}

#[test]
fn symbols_are_checked_as_alpaca_writes_their_asset_class() {
    let sym = |s: &str| parse(&format!("[market]\nsymbols = [\"{s}\"]\n")).map(|_| ()).map_err(|e| e.to_string());
    let e = sym("BTC-USD").unwrap_err();
    assert!(e.contains("market.symbols: \"BTC-USD\": crypto symbols are written BTC/USD"), "{e}");
    assert!(e.contains("write \"BTC/USD\""), "{e}");
    assert!(sym("BRK-B").unwrap_err().contains("write \"BRK.B\""));
    assert!(sym("BTC/EUROS").unwrap_err().contains("crypto pairs are written BASE/QUOTE"));
    for ok in ["BTC/USD", "ETH/BTC", "BRK.B", "AAPL"] {
        assert_eq!(sym(ok), Ok(()), "{ok}");
    }
}

#[test]
fn action_space_and_reward_keys_are_checked_and_round_trip() {
    use crate::env::{Benchmark, Objective, Reward};
    use crate::exec::ActionSpace;
    let c = parse(&format!(
        "{MIN}[env]\naction_space = \"weights\"\nno_trade_band = 0.03\nmax_weight = 0.5\nreward = \"vs-benchmark\"\nbenchmark = \"spy\"\nturnover_bps = 5\n"
    ))
    .unwrap();
    assert_eq!(c.env.action, ActionSpace::Weights { band: 0.03, max_weight: 0.5 });
    assert_eq!(c.env.reward, Reward::VsBenchmark { benchmark: Benchmark::Symbol("SPY".into()), turnover_bps: 5.0 });
    assert_eq!(c.retrain.gate.objective, Objective::Return);
    let again = parse(&c.to_toml()).unwrap();
    assert_eq!((again.env.action, again.env.reward), (c.env.action, c.env.reward));
    let d = parse(&format!("{MIN}[env]\nreward = \"differential-sharpe\"\nsharpe_eta = 0.05\n")).unwrap();
    assert_eq!(d.env.reward, Reward::DifferentialSharpe { eta: 0.05, turnover_bps: 0.0 });
    assert_eq!(parse(&d.to_toml()).unwrap().env.reward, d.env.reward);
    assert_eq!(parse(MIN).unwrap().env.action, ActionSpace::Shares, "share counts stay the default");
    let e = parse(&format!(
        "{MIN}[env]\naction_space = \"weight\"\nreward = \"equity\"\nbenchmark = \"SPY\"\nno_trade_band = 1.5\n"
    ))
    .unwrap_err()
    .to_string();
    for needle in [
        "env.action_space = \"weight\": must be one of \"shares\", \"weights\"",
        "env.no_trade_band = 1.5: must be in [0, 1)",
        "env.benchmark applies to env.reward = \"vs-benchmark\" only",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
    let e = parse(&format!("{MIN}[env]\naction_space = \"weights\"\naccounting = \"finrl-numpy\"\n")).unwrap_err();
    assert!(e.to_string().contains("FinRL's accounting has share counts only"), "{e}");
}

#[test]
fn retrain_warm_start_is_on_by_default_and_explained_when_mistyped() {
    assert!(parse(MIN).unwrap().retrain.warm_start, "a weekend retrain refines the champion by default");
    assert!(!parse(&format!("{MIN}[retrain]\nwarm_start = false\n")).unwrap().retrain.warm_start);
    let e = parse(&format!("{MIN}[retrain]\nwarm_start = \"yes\"\n")).unwrap_err().to_string();
    assert!(e.contains("retrain.warm_start = \"yes\" (line 4)") && e.contains("e.g. warm_start = true"), "{e}");
    let e = parse(&format!("{MIN}[retrain]\nwarmstart = true\n")).unwrap_err().to_string();
    assert!(e.contains("did you mean `warm_start`?"), "{e}");
}

/// Issue 34: a `[ppo]` section read from the file splits into the shape the trials of a population share and
/// the values each keeps, and joins back whole: every key lands on one side, the tuned ones on the tuned side.
#[test]
fn a_ppo_section_splits_into_its_shape_and_its_tuned_values_and_joins_back() {
    let tuned_keys = "learning_rate = 0.001\ngamma = 0.9\ngae_lambda = 0.8\nclip_range = 0.3\nent_coef = 0.01\n\
                      vf_coef = 0.7\nmax_grad_norm = 0.9\nseed = 5\n";
    let shape_keys = "hidden = [8]\nn_steps = 16\ntarget_kl = 0.02\nobs_clip = 5.0\nmixed_precision = true\n";
    let c = parse(&format!("{MIN}[ppo]\n{tuned_keys}{shape_keys}cpu_backend = \"libtorch\"\n")).unwrap().ppo;
    let (shape, tuned) = c.split();
    let want = PpoTuned {
        learning_rate: 0.001,
        gamma: 0.9,
        gae_lambda: 0.8,
        clip_range: 0.3,
        ent_coef: 0.01,
        vf_coef: 0.7,
        max_grad_norm: 0.9,
        seed: 5,
    };
    assert_eq!(tuned, want);
    assert_eq!((shape.hidden.clone(), shape.n_steps, shape.target_kl), (vec![8], 16, Some(0.02)));
    assert_eq!((shape.obs_clip, shape.mixed_precision), (5.0, true));
    assert_eq!(PpoConfig::from_parts(shape.clone(), tuned, c.cpu_backend), c, "the parts lost a value");
    let shape_only = parse(&format!("{MIN}[ppo]\n{shape_keys}")).unwrap().ppo;
    assert_eq!(shape_only.shape(), shape, "the tuned keys changed the shape");
    assert_ne!(shape_only.tuned(), tuned);
}

#[test]
fn mode_and_feed_kind_names_are_what_the_status_report_said() {
    // The status report's `mode` and `feed.kind` were `format!("{:?}", x).to_lowercase()`: the same words.
    for m in [Mode::Paper, Mode::Live] {
        assert_eq!(m.to_string(), format!("{m:?}").to_lowercase());
        assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
    }
    for k in [FeedKind::Replay, FeedKind::Alpaca] {
        assert_eq!(k.to_string(), format!("{k:?}").to_lowercase());
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
}
