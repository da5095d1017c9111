//! The dashboard page. It is loaded once: the server renders its sections from a `DashboardData` (numbers
//! in tables, each with a `data-value` holding the exact value, for tests and scrapers), and the page's
//! script (`app.js`) then replaces those sections from the event stream (`api::events`), which carries the
//! same rendering, and draws the charts from the stream's data with the charting library bundled at
//! build time (`build.rs`). The controls are rendered once and never replaced, so a form being filled in
//! is never disturbed. Nothing is loaded from elsewhere.

use super::data::{ChartPoint, DashboardData};
use super::format::{daily, money, num, pct, td, when};
use super::svg::esc;
use std::fmt::Write;

const STYLE: &str = include_str!("style.css");
const APP_JS: &str = include_str!("app.js");

fn stat(id: &str, label: &str, v: f64, shown: &str) -> String {
    format!(
        r#"<div class="stat"><span class="label">{label}</span><span id="{id}" data-value="{v}">{}</span></div>"#,
        esc(shown)
    )
}

/// Drawdown from the running peak, per point (0 = at a peak, 0.2 = 20% below it).
pub(crate) fn drawdown(values: &[f64]) -> Vec<f64> {
    let mut peak = f64::NEG_INFINITY;
    values
        .iter()
        .map(|&v| {
            peak = peak.max(v);
            if peak > 0.0 { 1.0 - v / peak } else { 0.0 }
        })
        .collect()
}

/// The page's sections that the event stream replaces, by name (each in `<div id="sec-NAME">`).
pub(crate) fn sections(d: &DashboardData) -> Vec<(&'static str, String)> {
    vec![
        ("head", head_section(d)),
        ("returns", returns_section(&d.equity)),
        ("positions", positions_section(d)),
        ("book", super::tables::book_section(d)),
        ("models", super::tables::models_section(d)),
        ("training", super::tables::training_section(d)),
        ("decisions", super::tables::decisions_section(d)),
        ("logs", super::tables::logs_section(&d.logs)),
        ("footer", footer(d)),
    ]
}

/// What the page links besides its own sections: the account report (`/report`, with a daemon behind the
/// dashboard) and the last backtest's tear sheet (`/report/backtest`, when one was written; when).
#[derive(Debug, Clone, Default)]
pub(crate) struct Links {
    pub account: bool,
    pub backtest: Option<chrono::DateTime<chrono::Utc>>,
}

/// The page; with `csrf`, the controls (their forms carry it).
#[cfg(test)]
pub(crate) fn render(d: &DashboardData, csrf: Option<&str>) -> String {
    render_with(d, csrf, &Links::default())
}

/// The page with its report links (`Links`).
pub(crate) fn render_with(d: &DashboardData, csrf: Option<&str>, links: &Links) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>tradebot</title><style>{STYLE}</style></head><body>"#
    );
    let secs: std::collections::BTreeMap<&str, String> = sections(d).into_iter().collect();
    let sec = |o: &mut String, name: &str| {
        let _ = write!(o, r#"<div id="sec-{name}" class="sec">{}</div>"#, secs.get(name).map_or("", |s| s.as_str()));
    };
    sec(&mut o, "head");
    if let Some(csrf) = csrf {
        controls_section(&mut o, d, csrf);
    }
    reports_section(&mut o, links);
    o.push_str(r#"<section id="equity-section"><h2>Equity against buy-and-hold and cash</h2>"#);
    sec(&mut o, "returns");
    if !super::assets::charts_bundled() {
        let _ = write!(o, r#"<p id="charts-missing" class="bad">{}</p>"#, esc(super::assets::CHARTS_MISSING));
    }
    o.push_str(r#"<div class="chart" id="equity-chart"></div><h3>Drawdown</h3><div class="chart small" id="drawdown-chart"></div></section>"#);
    o.push_str(r#"<section id="prices"><h2>Prices, volume and the bot's fills (▲ buy, ▼ sell), with the trailing stop</h2><div id="price-charts"></div></section>"#);
    for name in ["positions", "book", "models", "training", "decisions", "logs", "footer"] {
        sec(&mut o, name);
    }
    // The first data, for the charts before the stream's first update.
    let first = serde_json::to_string(d).unwrap_or_else(|_| "null".into()).replace("</", "<\\/");
    let _ = write!(o, r#"<script id="first-data" type="application/json">{first}</script>"#);
    if super::assets::charts_bundled() {
        o.push_str(r#"<script src="/assets/lightweight-charts.js"></script>"#);
    }
    let _ = write!(o, "<script>{APP_JS}</script></body></html>");
    o
}

fn head_section(d: &DashboardData) -> String {
    let s = &d.status;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<header><h1>tradebot</h1><span id="mode" class="badge">{}</span><span id="activity">{}</span><span id="live" class="live" title="updates from the daemon">●</span></header>"#,
        esc(&s.mode),
        esc(&s.activity)
    );
    o.push_str(r#"<section class="stats">"#);
    o.push_str(&stat("equity", "equity", s.equity, &money(s.equity)));
    o.push_str(&stat("cash", "cash", s.cash, &money(s.cash)));
    o.push_str(&stat("pnl-today", "P&L today", s.pnl_today, &money(s.pnl_today)));
    o.push_str(&stat("exposure", "gross exposure", s.risk.gross_exposure, &pct(s.risk.gross_exposure)));
    let ks = if s.risk.kill_switch { "TRIPPED" } else { "armed" };
    let _ = write!(
        o,
        r#"<div class="stat"><span class="label">kill switch</span><span id="kill-switch" class="{}" title="{}">{ks}</span></div>"#,
        if s.risk.kill_switch { "bad" } else { "ok" },
        esc(s.risk.kill_reason.as_deref().unwrap_or(""))
    );
    let state = if s.risk.paused {
        "paused"
    } else if s.activity.starts_with(crate::control::report::NO_MODEL) {
        crate::control::report::NO_MODEL
    } else if s.activity.contains("finished") {
        // A replay that ended trades no more: say so, not "trading".
        s.activity.as_str()
    } else {
        "trading"
    };
    let _ =
        write!(o, r#"<div class="stat"><span class="label">state</span><span id="paused">{}</span></div>"#, esc(state));
    let feed = if s.feed.connected { "connected" } else { "disconnected" };
    let _ = write!(
        o,
        r#"<div class="stat"><span class="label">feed ({})</span><span id="feed" class="{}">{feed}</span></div>"#,
        esc(&s.feed.kind),
        if s.feed.connected { "ok" } else { "bad" }
    );
    o.push_str("</section>");
    if !s.feed.stale.is_empty() {
        let list: Vec<String> = s
            .feed
            .stale
            .iter()
            .map(|x| format!("{} {} ({} bars)", esc(&x.symbol), if x.down { "down" } else { "stale" }, x.bars))
            .collect();
        let _ = write!(o, "<p class=\"bad\" id=\"stale\">Not traded, no recent bar: {}</p>", list.join(", "));
    }
    o
}

fn footer(d: &DashboardData) -> String {
    let s = &d.status;
    format!(
        "<footer>pid {} · feed {} ({}) · {} bars received · {} reconnects</footer>",
        s.pid,
        esc(&s.feed.kind),
        if s.feed.connected { "connected" } else { "disconnected" },
        s.feed.bars_received,
        s.feed.reconnects
    )
}

/// One form per control, each a POST with the CSRF token; flatten and promote need a ticked box. The
/// page's script posts them with `fetch` and shows the answer in the form's `.outcome`.
fn controls_section(o: &mut String, d: &DashboardData, csrf: &str) {
    let form = |action: &str, inner: &str, label: &str| {
        format!(
            r#"<form id="control-{action}" method="post" action="/control/{action}"><input type="hidden" name="csrf" value="{}">{inner}<button type="submit">{label}</button><span class="outcome" role="status"></span></form>"#,
            esc(csrf)
        )
    };
    let confirm =
        |what: &str| format!(r#"<label><input type="checkbox" name="confirm" value="yes" required> {what}</label>"#);
    let kinds = |all: bool| {
        let mut k = String::from(r#"<select name="kind">"#);
        if all {
            k.push_str(r#"<option value="all">all models</option>"#);
        }
        k.push_str(r#"<option value="ppo">ppo</option><option value="lstm">lstm</option></select>"#);
        k
    };
    let mut models = String::from(r#"<select name="id" required><option value="">choose a model</option>"#);
    for m in d.models.iter().filter(|m| m.state != "champion").take(20) {
        let _ = write!(models, r#"<option value="{id}">{id} ({})</option>"#, esc(&m.state), id = esc(&m.id));
    }
    models.push_str("</select>");
    o.push_str(r#"<section id="controls"><h2>Controls</h2><div class="controls">"#);
    o.push_str(&form("pause", "", "Pause"));
    o.push_str(&form("resume", "", "Resume"));
    o.push_str(&form("flatten", &confirm("sell every position, then pause"), "Flatten"));
    o.push_str(&form("retrain", &kinds(true), "Retrain now"));
    o.push_str(&form("promote", &(models + &confirm("trade with it from the next bar")), "Promote"));
    o.push_str(&form("rollback", &kinds(false), "Roll back"));
    o.push_str("</div></section>");
}

/// The reports, rendered once like the controls: a period form for the account report and the last
/// backtest's tear sheet. Nothing without a daemon behind the dashboard.
fn reports_section(o: &mut String, links: &Links) {
    if !links.account {
        return;
    }
    o.push_str(
        r#"<section id="reports"><h2>Reports</h2><form id="report-form" method="get" action="/report"><label>from <input type="date" name="from"></label> <label>to <input type="date" name="to"></label> <button type="submit">Account report</button></form>"#,
    );
    match links.backtest {
        Some(at) => {
            let _ = write!(
                o,
                r#"<p><a id="backtest-report" href="/report/backtest">The last backtest's tear sheet</a> (written {})</p>"#,
                at.format("%Y-%m-%d %H:%M:%S UTC")
            );
        }
        None => o.push_str(
            r#"<p id="no-backtest">No backtest tear sheet yet: <code>tradebot backtest --report FILE.html</code> keeps one here.</p>"#,
        ),
    }
    o.push_str("</section>");
}

/// The returns since the first point, and the deepest drawdown (the charts beside them draw both).
fn returns_section(pts: &[ChartPoint]) -> String {
    let eq: Vec<f64> = pts.iter().map(|p| p.equity).collect();
    let bh: Vec<f64> = pts.iter().map(|p| p.buy_hold).collect();
    let first = pts.first().map(|p| p.t.date_naive().to_string()).unwrap_or_default();
    let ret = |v: &[f64]| match (v.first(), v.last()) {
        (Some(a), Some(b)) if *a > 0.0 => b / a - 1.0,
        _ => 0.0,
    };
    let max_dd = drawdown(&eq).into_iter().fold(0.0, f64::max);
    format!(
        r#"<p id="returns">since {first}: tradebot <span id="return-tradebot" data-value="{r}">{}</span>, buy &amp; hold <span id="return-buy-hold" data-value="{rb}">{}</span>, cash <span id="return-cash" data-value="0">{}</span> · deepest drawdown <span id="max-drawdown" data-value="{max_dd}">{}</span></p>"#,
        pct(ret(&eq)),
        pct(ret(&bh)),
        pct(0.0),
        pct(max_dd),
        r = ret(&eq),
        rb = ret(&bh),
    )
}

fn positions_section(d: &DashboardData) -> String {
    let daily = daily(d);
    let mut o = String::from(
        r#"<section><h2>Positions</h2><div class="scroll"><table id="positions"><tr><th>symbol</th><th>qty</th><th>entry</th><th>price</th><th>value</th><th>unrealised P&amp;L</th><th>last bar</th></tr>"#,
    );
    for p in &d.status.positions {
        let last = d.status.feed.last_bar.get(&p.symbol).map(|t| when(t, daily)).unwrap_or_default();
        let book = d.symbols.iter().find(|v| v.symbol == p.symbol && v.qty > 0.0);
        let (entry, unrealised) = book.map_or((f64::NAN, f64::NAN), |v| (v.avg_entry, (p.price - v.avg_entry) * p.qty));
        let _ = write!(
            o,
            r#"<tr data-symbol="{sym}"><td>{sym}</td>{}{}{}{}{}<td>{}</td></tr>"#,
            td("qty", p.qty, &num(p.qty)),
            td("entry", entry, &money(entry)),
            td("price", p.price, &money(p.price)),
            td("value", p.value, &money(p.value)),
            td(if unrealised < 0.0 { "unrealised bad" } else { "unrealised" }, unrealised, &money(unrealised)),
            esc(&last),
            sym = esc(&p.symbol)
        );
    }
    o.push_str(r#"</table></div><h2>Open orders</h2><div class="scroll"><table id="open-orders"><tr><th>client order id</th><th>symbol</th><th>side</th><th>qty</th><th>status</th></tr>"#);
    for x in &d.status.open_orders {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td></tr>",
            esc(&x.client_order_id),
            esc(&x.symbol),
            esc(&x.side),
            td("qty", x.qty, &num(x.qty)),
            esc(&x.status)
        );
    }
    o.push_str("</table></div></section>");
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn money_has_its_currency_and_thousands() {
        use super::money;
        assert_eq!(money(123_456.785), "$123,456.79");
        assert_eq!(money(-25.79), "-$25.79");
        assert_eq!(money(0.001), "$0.00");
        assert_eq!(money(f64::NAN), "-");
    }
}
