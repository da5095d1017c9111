//! The dashboard page, rendered on the server from a `DashboardData`: numbers in tables (each with a
//! `data-value` holding the exact value, for tests and scrapers), charts as inline SVG, refreshed every
//! few seconds by the browser. No script, no external asset.

use super::data::{DashboardData, EquityPoint, TrainingView};
use super::svg::{Marker, Series, chart_with_markers, esc, line_chart};
use std::fmt::Write;

const STYLE: &str = include_str!("style.css");

fn money(v: f64) -> String {
    format!("{v:.2}")
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// " · GPU 97% busy · 5.1 GB · 310 W" after a training run's progress bar.
fn gpu_html(g: super::data::GpuNow) -> String {
    let power = g.power_w.map(|w| format!(" · {w:.0} W")).unwrap_or_default();
    format!(
        r#" · <span class="gpu" data-busy="{}">GPU {:.0}% busy · {:.1} GB{power}</span>"#,
        g.busy_pct,
        g.busy_pct,
        g.memory_mb / 1024.0
    )
}

fn num(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() { format!("{v:.0}") } else { format!("{v:.4}") }
}

/// A `<td>` showing `shown` and carrying the exact value.
fn td(class: &str, v: f64, shown: &str) -> String {
    format!(r#"<td class="{class}" data-value="{v}">{}</td>"#, esc(shown))
}

fn stat(id: &str, label: &str, v: f64, shown: &str) -> String {
    format!(
        r#"<div class="stat"><span class="label">{label}</span><span id="{id}" data-value="{v}">{}</span></div>"#,
        esc(shown)
    )
}

/// Drawdown from the running peak, per point (0 = at a peak, 0.2 = 20% below it).
pub fn drawdown(values: &[f64]) -> Vec<f64> {
    let mut peak = f64::NEG_INFINITY;
    values
        .iter()
        .map(|&v| {
            peak = peak.max(v);
            if peak > 0.0 { 1.0 - v / peak } else { 0.0 }
        })
        .collect()
}

/// The page; with `csrf`, the controls (their forms carry it).
pub fn render(d: &DashboardData, refresh_secs: u32, csrf: Option<&str>) -> String {
    let s = &d.status;
    let mut o = String::with_capacity(32 * 1024);
    let _ = write!(
        o,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh_secs}"><title>tradebot</title><style>{STYLE}</style></head><body>"#
    );
    let _ = write!(
        o,
        r#"<header><h1>tradebot</h1><span id="mode" class="badge">{}</span><span id="activity">{}</span></header>"#,
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
    let paused = if s.risk.paused {
        "paused"
    } else if s.activity.starts_with(crate::control::report::NO_MODEL) {
        crate::control::report::NO_MODEL
    } else {
        "trading"
    };
    let _ = write!(o, r#"<div class="stat"><span class="label">state</span><span id="paused">{paused}</span></div>"#);
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
    if let Some(csrf) = csrf {
        controls_section(&mut o, d, csrf);
    }
    equity_section(&mut o, &d.equity);
    positions_section(&mut o, d);
    book_section(&mut o, d);
    decisions_section(&mut o, d);
    models_section(&mut o, d);
    training_section(&mut o, &d.training);
    logs_section(&mut o, &d.logs);
    let _ = write!(
        o,
        "<footer>pid {} · feed {} ({}) · {} bars received · {} reconnects</footer>",
        s.pid,
        esc(&s.feed.kind),
        if s.feed.connected { "connected" } else { "disconnected" },
        s.feed.bars_received,
        s.feed.reconnects
    );
    o.push_str("</body></html>");
    o
}

/// The daemon's last warnings and errors, most recent first.
fn logs_section(o: &mut String, logs: &[crate::logging::LogLine]) {
    let _ = write!(o, r#"<section id="logs"><h2>Warnings and errors ({})</h2>"#, logs.len());
    if logs.is_empty() {
        o.push_str("<p>none since the daemon started</p></section>");
        return;
    }
    o.push_str("<table><tr><th>time</th><th>level</th><th>message</th></tr>");
    for l in logs.iter().rev() {
        let class = if l.level == "ERROR" { "bad" } else { "warn" };
        let _ = write!(
            o,
            r#"<tr class="log"><td>{}</td><td class="{class}">{}</td><td>{}</td></tr>"#,
            l.at.format("%Y-%m-%d %H:%M:%S"),
            esc(&l.level),
            esc(&l.message)
        );
    }
    o.push_str("</table></section>");
}

/// One form per control, each a POST with the CSRF token; flatten and promote need a ticked box.
fn controls_section(o: &mut String, d: &DashboardData, csrf: &str) {
    let form = |action: &str, inner: &str, label: &str| {
        format!(
            r#"<form id="control-{action}" method="post" action="/control/{action}"><input type="hidden" name="csrf" value="{}">{inner}<button type="submit">{label}</button></form>"#,
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

fn equity_section(o: &mut String, pts: &[EquityPoint]) {
    let eq: Vec<f64> = pts.iter().map(|p| p.equity).collect();
    let bh: Vec<f64> = pts.iter().map(|p| p.buy_hold).collect();
    let first = pts.first().map(|p| p.t.date_naive().to_string()).unwrap_or_default();
    let last = pts.last().map(|p| p.t.date_naive().to_string()).unwrap_or_default();
    // Cash: the starting equity, held.
    let cash = vec![eq.first().copied().unwrap_or(0.0); eq.len()];
    o.push_str("<section><h2>Equity against buy-and-hold and cash</h2>");
    let ret = |v: &[f64]| match (v.first(), v.last()) {
        (Some(a), Some(b)) if *a > 0.0 => b / a - 1.0,
        _ => 0.0,
    };
    let _ = write!(
        o,
        r#"<p id="returns">since {first}: tradebot <span id="return-tradebot" data-value="{r}">{}</span>, buy &amp; hold <span id="return-buy-hold" data-value="{rb}">{}</span>, cash <span id="return-cash" data-value="0">{}</span></p>"#,
        pct(ret(&eq)),
        pct(ret(&bh)),
        pct(0.0),
        r = ret(&eq),
        rb = ret(&bh),
    );
    o.push_str(&line_chart(
        "equity-chart",
        &[
            Series { name: "tradebot", colour: "#0a66c2", values: &eq },
            Series { name: "buy & hold", colour: "#888", values: &bh },
            Series { name: "cash", colour: "#bbb", values: &cash },
        ],
        (&first, &last),
        |v| format!("{v:.0}"),
    ));
    let (dd, dd_bh) = (drawdown(&eq), drawdown(&bh));
    let max_dd = dd.iter().copied().fold(0.0, f64::max);
    let _ = write!(o, r#"<h2>Drawdown <span id="max-drawdown" data-value="{max_dd}">max {}</span></h2>"#, pct(max_dd));
    let neg = |v: &[f64]| v.iter().map(|x| -x).collect::<Vec<f64>>();
    o.push_str(&line_chart(
        "drawdown-chart",
        &[
            Series { name: "tradebot", colour: "#c0392b", values: &neg(&dd) },
            Series { name: "buy & hold", colour: "#888", values: &neg(&dd_bh) },
        ],
        (&first, &last),
        pct,
    ));
    o.push_str("</section>");
}

fn positions_section(o: &mut String, d: &DashboardData) {
    o.push_str(r#"<section><h2>Positions</h2><table id="positions"><tr><th>symbol</th><th>qty</th><th>entry</th><th>price</th><th>value</th><th>unrealised P&amp;L</th><th>last bar</th></tr>"#);
    for p in &d.status.positions {
        let last = d.status.feed.last_bar.get(&p.symbol).map(|t| t.to_rfc3339()).unwrap_or_default();
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
    o.push_str(r#"</table><h2>Open orders</h2><table id="open-orders"><tr><th>client order id</th><th>symbol</th><th>side</th><th>qty</th><th>status</th></tr>"#);
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
    o.push_str("</table></section>");
}

/// Each symbol's price with the bot's buys and sells, its performance, and the closed trades.
fn book_section(o: &mut String, d: &DashboardData) {
    o.push_str(r#"<section id="prices"><h2>Prices with the bot's buys (▲) and sells (▼)</h2><div class="charts">"#);
    for p in &d.prices {
        let index = |t: &chrono::DateTime<chrono::Utc>| p.t.iter().position(|x| x >= t);
        let marks: Vec<Marker> = p
            .fills
            .iter()
            .filter_map(|f| {
                let i = index(&f.t)?;
                let side = if f.buy { "buy" } else { "sell" };
                Some(Marker {
                    index: i,
                    value: f.price,
                    up: f.buy,
                    label: format!("{side} {} at {}", num(f.qty), money(f.price)),
                })
            })
            .collect();
        let first = p.t.first().map(|t| t.date_naive().to_string()).unwrap_or_default();
        let last = p.t.last().map(|t| t.date_naive().to_string()).unwrap_or_default();
        let _ = write!(o, "<div><h3>{}</h3>", esc(&p.symbol));
        o.push_str(&chart_with_markers(
            &format!("price-{}", p.symbol),
            &[Series { name: "close", colour: "#0a66c2", values: &p.close }],
            &marks,
            (&first, &last),
            money,
        ));
        o.push_str("</div>");
    }
    o.push_str("</div></section>");
    o.push_str(r#"<section><h2>By symbol</h2><table id="by-symbol"><tr><th>symbol</th><th>held</th><th>entry</th><th>unrealised</th><th>realised</th><th>fees</th><th>closed trades</th><th>won</th></tr>"#);
    for v in &d.symbols {
        let won = if v.trades > 0 { pct(v.wins as f64 / v.trades as f64) } else { "-".into() };
        let _ = write!(
            o,
            r#"<tr data-symbol="{sym}"><td>{sym}</td>{}{}{}{}{}{}<td>{won}</td></tr>"#,
            td("qty", v.qty, &num(v.qty)),
            td("entry", v.avg_entry, &if v.qty > 0.0 { money(v.avg_entry) } else { "-".into() }),
            td("unrealised", v.unrealised, &money(v.unrealised)),
            td(if v.realised < 0.0 { "realised bad" } else { "realised" }, v.realised, &money(v.realised)),
            td("fees", v.fees, &money(v.fees)),
            td("trades", v.trades as f64, &v.trades.to_string()),
            sym = esc(&v.symbol)
        );
    }
    let _ = write!(
        o,
        r#"</table><h2>Closed trades (last {})</h2><table id="trades"><tr><th>symbol</th><th>entry</th><th>exit</th><th>qty</th><th>entry price</th><th>exit price</th><th>P&amp;L</th><th>fees</th></tr>"#,
        d.trades.len()
    );
    for t in &d.trades {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}{}{}{}{}</tr>",
            esc(&t.symbol),
            t.entry_time.date_naive(),
            t.exit_time.date_naive(),
            td("qty", t.qty, &num(t.qty)),
            td("entry", t.entry_price, &money(t.entry_price)),
            td("exit", t.exit_price, &money(t.exit_price)),
            td(if t.pnl < 0.0 { "pnl bad" } else { "pnl ok" }, t.pnl, &money(t.pnl)),
            td("fees", t.fees, &money(t.fees)),
        );
    }
    o.push_str("</table></section>");
}

fn decisions_section(o: &mut String, d: &DashboardData) {
    o.push_str(r#"<section><h2>Recent decisions</h2><table id="decisions"><tr><th>bar</th><th>symbol</th><th>model</th><th>outputs</th><th>action</th></tr>"#);
    for x in d.decisions.iter().take(50) {
        let outs: Vec<String> = x.outputs.iter().map(|(k, v)| format!("{k}={}", crate::domain::figure(*v))).collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.t.to_rfc3339()),
            esc(&x.symbol),
            esc(&x.model_id),
            esc(&outs.join(" ")),
            esc(&x.action)
        );
    }
    o.push_str("</table></section>");
}

fn models_section(o: &mut String, d: &DashboardData) {
    let m = &d.status.models;
    let _ = write!(
        o,
        r#"<section><h2>Models</h2><p>PPO champion <code id="champion-ppo">{}</code> · LSTM champion <code id="champion-lstm">{}</code>{}</p>"#,
        esc(m.ppo.as_deref().unwrap_or("none")),
        esc(m.lstm.as_deref().unwrap_or("none")),
        m.next_retrain.map(|t| format!(" · next retrain {}", esc(&t.to_rfc3339()))).unwrap_or_default()
    );
    o.push_str(r#"<table id="models"><tr><th>id</th><th>kind</th><th>state</th><th>created</th><th>metrics</th></tr>"#);
    for x in &d.models {
        let metrics: Vec<String> =
            x.metrics.iter().map(|(k, v)| format!("{k}={}", crate::domain::figure(*v))).collect();
        let _ = write!(
            o,
            r#"<tr data-id="{}"><td>{}</td><td>{}</td><td class="state">{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&x.id),
            esc(&x.id),
            esc(&x.kind),
            esc(&x.state),
            esc(&x.created_at.to_rfc3339()),
            esc(&metrics.join(" "))
        );
    }
    o.push_str(r#"</table><h2>Promotion gate decisions</h2><table id="gate"><tr><th>when</th><th>kind</th><th>candidate</th><th>outcome</th><th>reason</th><th>numbers</th></tr>"#);
    for g in &d.gate {
        let nums = crate::retrain::gate::numbers_line(&g.numbers);
        let _ = write!(
            o,
            r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="outcome">{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&g.at.to_rfc3339()),
            esc(&g.kind),
            esc(g.candidate.as_deref().unwrap_or("")),
            esc(&g.outcome),
            esc(&g.reason),
            esc(&nums)
        );
    }
    o.push_str("</table></section>");
}

fn training_section(o: &mut String, runs: &[TrainingView]) {
    o.push_str(r#"<section id="training"><h2>Training runs <small><a href="/search">hyper-parameter searches</a></small></h2>"#);
    if runs.is_empty() {
        o.push_str("<p>none yet</p>");
    }
    for r in runs.iter().take(5) {
        let _ = write!(
            o,
            r#"<div class="run" data-id="{}"><h3>{} {} · {} · <span class="outcome">{}</span></h3>"#,
            esc(&r.id),
            esc(&r.kind),
            esc(&r.id),
            esc(&r.started_at.to_rfc3339()),
            esc(&r.outcome)
        );
        if let Some(p) = &r.progress {
            let frac = if p.total > 0.0 { (p.done / p.total).clamp(0.0, 1.0) } else { 0.0 };
            let _ = write!(
                o,
                r#"<p class="progress"><progress value="{frac:.3}" max="1"></progress> {} · <span class="rate" data-value="{}">{:.0}/s</span> · ETA {:.0} s{}</p>"#,
                pct(frac),
                p.steps_per_s,
                p.steps_per_s,
                p.eta_secs,
                p.gpu.map(gpu_html).unwrap_or_default()
            );
        }
        if let Some((reason, numbers)) = &r.gate {
            let _ = write!(o, r#"<p class="gate">gate: {}<br><small>{}</small></p>"#, esc(reason), esc(numbers));
        }
        if !r.metrics.is_empty() {
            o.push_str("<table class=\"final\"><tr>");
            for k in r.metrics.keys() {
                let _ = write!(o, "<th>{}</th>", esc(k));
            }
            o.push_str("</tr><tr>");
            for (k, v) in &r.metrics {
                let _ = write!(o, "{}", td(k, *v, &num(*v)));
            }
            o.push_str("</tr></table>");
        }
        // Per PPO update or LSTM epoch; a curve of one point is no curve.
        let per = if r.kind == "lstm" { "epoch" } else { "update" };
        o.push_str(r#"<div class="charts">"#);
        for (name, values) in r.curves.iter().filter(|(_, v)| v.len() >= 2) {
            let id = format!("train-{}-{}", r.id, name);
            let (first, last) = (format!("{per} 1"), format!("{per} {}", values.len()));
            let _ = write!(o, "<div><h4>{} by {per}</h4>", esc(name));
            o.push_str(&line_chart(&id, &[Series { name, colour: "#6a1b9a", values }], (&first, &last), |v| {
                format!("{v:.3}")
            }));
            o.push_str("</div>");
        }
        o.push_str("</div></div>");
    }
    o.push_str("</section>");
}
