//! The dashboard's tables, each rendered as a section of the page (`page::sections`): per-symbol
//! performance and closed trades, decisions, models and the gate's decisions in words, training runs (their
//! curves are drawn by the page's script in the containers left here), warnings and errors.

use super::data::DashboardData;
use super::format::{daily, gpu_html, money, num, pct, td, when};
use super::svg::esc;
use std::fmt::Write;

/// Each symbol's performance and the closed trades (the price charts are drawn by the page's script).
pub(super) fn book_section(d: &DashboardData) -> String {
    let mut o = String::new();
    let daily = daily(d);
    o.push_str(r#"<section><h2>By symbol</h2><div class="scroll"><table id="by-symbol"><tr><th>symbol</th><th>held</th><th>entry</th><th>unrealised</th><th>realised</th><th>fees</th><th>closed trades</th><th>won</th></tr>"#);
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
        r#"</table></div><h2>Closed trades (last {})</h2><div class="scroll"><table id="trades"><tr><th>symbol</th><th>entry</th><th>exit</th><th>qty</th><th>entry price</th><th>exit price</th><th>P&amp;L</th><th>fees</th></tr>"#,
        d.trades.len()
    );
    for t in &d.trades {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}{}{}{}{}</tr>",
            esc(&t.symbol),
            when(&t.entry_time, daily),
            when(&t.exit_time, daily),
            td("qty", t.qty, &num(t.qty)),
            td("entry", t.entry_price, &money(t.entry_price)),
            td("exit", t.exit_price, &money(t.exit_price)),
            td(if t.pnl < 0.0 { "pnl bad" } else { "pnl ok" }, t.pnl, &money(t.pnl)),
            td("fees", t.fees, &money(t.fees)),
        );
    }
    o.push_str("</table></div></section>");
    o
}

pub(super) fn decisions_section(d: &DashboardData) -> String {
    let mut o = String::new();
    let daily = daily(d);
    o.push_str(r#"<section><h2>Recent decisions</h2><div class="scroll"><table id="decisions"><tr><th>bar</th><th>symbol</th><th>model</th><th>outputs</th><th>action</th></tr>"#);
    for x in d.decisions.iter().take(50) {
        let outs: Vec<String> = x.outputs.iter().map(|(k, v)| format!("{k}={}", crate::domain::figure(*v))).collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&when(&x.t, daily)),
            esc(&x.symbol),
            esc(&x.model_id),
            esc(&outs.join(" ")),
            esc(&x.action)
        );
    }
    o.push_str("</table></div></section>");
    o
}

pub(super) fn models_section(d: &DashboardData) -> String {
    let mut o = String::new();
    let m = &d.status.models;
    let _ = write!(
        o,
        r#"<section><h2>Models</h2><p>PPO champion <code id="champion-ppo">{}</code> · LSTM champion <code id="champion-lstm">{}</code>{}</p>"#,
        esc(m.ppo.as_deref().unwrap_or("none")),
        esc(m.lstm.as_deref().unwrap_or("none")),
        m.next_retrain.map(|t| format!(" · next retrain {}", esc(&when(&t, false)))).unwrap_or_default()
    );
    o.push_str(r#"<div class="scroll"><table id="models"><tr><th>id</th><th>kind</th><th>state</th><th>created</th><th>metrics</th></tr>"#);
    for x in &d.models {
        let metrics: Vec<String> = x
            .metrics
            .iter()
            .map(|(k, v)| {
                format!("<span class=\"kv\">{} <b>{}</b></span>", esc(&k.replace('_', " ")), crate::domain::figure(*v))
            })
            .collect();
        let _ = write!(
            o,
            r#"<tr data-id="{}"><td>{}</td><td>{}</td><td class="state">{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&x.id),
            esc(&x.id),
            esc(&x.kind),
            esc(&x.state),
            esc(&when(&x.created_at, false)),
            metrics.join(" ")
        );
    }
    o.push_str(r#"</table></div><h2>Promotion gate decisions</h2><div class="scroll"><table id="gate"><tr><th>when</th><th>kind</th><th>candidate</th><th>decision</th><th>why</th><th>returns</th></tr>"#);
    for g in &d.gate {
        let nums = crate::retrain::gate::numbers_line(&g.numbers);
        let _ = write!(
            o,
            r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="outcome">{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&when(&g.at, false)),
            esc(&g.kind),
            esc(g.candidate.as_deref().unwrap_or("")),
            esc(&outcome_words(&g.outcome, g.candidate.as_deref())),
            esc(&g.reason),
            esc(&nums)
        );
    }
    o.push_str("</table></div></section>");
    o
}

/// The gate's outcome in words.
fn outcome_words(outcome: &str, candidate: Option<&str>) -> String {
    let who = candidate.unwrap_or("the candidate");
    match outcome {
        "promoted" => format!("promoted: {who} trades from the next bar"),
        "kept" => format!("kept the champion: {who} not promoted"),
        "failed" => "failed: no candidate was judged".into(),
        other => other.to_string(),
    }
}

pub(super) fn training_section(d: &DashboardData) -> String {
    let (runs, mut o) = (&d.training, String::new());
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
            esc(&when(&r.started_at, false)),
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
            o.push_str("<div class=\"scroll\"><table class=\"final\"><tr>");
            for k in r.metrics.keys() {
                let _ = write!(o, "<th>{}</th>", esc(&k.replace('_', " ")));
            }
            o.push_str("</tr><tr>");
            for (k, v) in &r.metrics {
                let _ = write!(o, "{}", td(k, *v, &num(*v)));
            }
            o.push_str("</tr></table></div>");
        }
        // Per PPO update or LSTM epoch; a curve of one point is no curve. The page's script draws them.
        let per = if r.kind == "lstm" { "epoch" } else { "update" };
        o.push_str(r#"<div class="charts">"#);
        for name in r.curves.iter().filter(|(_, v)| v.len() >= 2).map(|(n, _)| n) {
            let _ = write!(
                o,
                r#"<div><h4>{} by {per}</h4><div class="chart small train-chart" id="train-{}-{}" data-run="{}" data-curve="{}" data-per="{per}"></div></div>"#,
                esc(name),
                esc(&r.id),
                esc(name),
                esc(&r.id),
                esc(name)
            );
        }
        o.push_str("</div></div>");
    }
    o.push_str("</section>");
    o
}

/// The daemon's last warnings and errors, most recent first.
pub(super) fn logs_section(logs: &[crate::logging::LogLine]) -> String {
    let mut o = String::new();
    let _ = write!(o, r#"<section id="logs"><h2>Warnings and errors ({})</h2>"#, logs.len());
    if logs.is_empty() {
        o.push_str("<p>none since the daemon started</p></section>");
        return o;
    }
    o.push_str("<div class=\"scroll\"><table><tr><th>time</th><th>level</th><th>message</th></tr>");
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
    o.push_str("</table></div></section>");
    o
}
