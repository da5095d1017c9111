//! A backtest's tear sheet (`tradebot backtest --report FILE.html`): one self-contained HTML file (no
//! script, no font, no request: inline SVG and tables) with the equity against buy-and-hold and cash, the
//! drawdown, the monthly returns as a heat map, the rolling Sharpe ratio, the figures of each side, a
//! per-symbol table and the trades; the report's JSON (what `--json` prints) is embedded as it is, so a
//! reader can check the page's numbers. And the fills as CSV (`--trades FILE.csv`).

use super::{BacktestReport, EquityPoint};
use crate::oms::FillRecord;
use crate::oms::trades::round_trips;
use chrono::Datelike;
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Bars in the rolling Sharpe window (a quarter of daily bars).
pub(crate) const ROLLING: usize = 63;

/// Where the last backtest's tear sheet is kept for the dashboard (`/report/backtest`), under the state
/// directory.
pub(crate) const LAST_BACKTEST: &str = "reports/backtest-latest.html";

/// Keeps a copy of a backtest's tear sheet as `state_dir/LAST_BACKTEST` for the dashboard. Best effort:
/// a state directory this user may not write keeps the previous one (a DEBUG line says why).
pub(crate) fn keep_latest(state_dir: &std::path::Path, page: &str) {
    let path = state_dir.join(LAST_BACKTEST);
    let tmp = path.with_extension("html.tmp");
    let kept = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, page))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = kept {
        log::debug!("backtest: the dashboard keeps its previous tear sheet: cannot write {}: {e}", path.display());
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The fills as CSV, one row each: `time,symbol,side,qty,price,notional,client_order_id`.
pub(crate) fn trades_csv(fills: &[FillRecord]) -> String {
    let mut out = String::from("time,symbol,side,qty,price,notional,client_order_id\n");
    for f in fills {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{}",
            f.time.to_rfc3339(),
            f.symbol,
            f.side,
            f.qty,
            f.price,
            (f.qty * f.price).round_dp(2),
            f.client_order_id
        );
    }
    out
}

/// Month-end to month-end returns of the equity, `(year, month, return)`; the first month from the
/// curve's first point.
pub(crate) fn monthly_returns(curve: &[EquityPoint]) -> Vec<(i32, u32, f64)> {
    let mut out = Vec::new();
    let Some(first) = curve.first() else { return out };
    let mut base = first.equity;
    for (i, p) in curve.iter().enumerate() {
        let last_of_month = curve.get(i + 1).is_none_or(|n| (n.t.year(), n.t.month()) != (p.t.year(), p.t.month()));
        if last_of_month {
            out.push((p.t.year(), p.t.month(), if base > 0.0 { p.equity / base - 1.0 } else { 0.0 }));
            base = p.equity;
        }
    }
    out
}

/// The Sharpe ratio of the last `window` per-bar returns at each bar from the `window`-th on, annualised.
pub(crate) fn rolling_sharpe(curve: &[EquityPoint], window: usize, periods_per_year: f64) -> Vec<f64> {
    let rets: Vec<f64> =
        curve.windows(2).map(|w| if w[0].equity > 0.0 { w[1].equity / w[0].equity - 1.0 } else { 0.0 }).collect();
    rets.windows(window.max(2))
        .map(|r| {
            let n = r.len() as f64;
            let mean = r.iter().sum::<f64>() / n;
            let sd = (r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            if sd > 0.0 { mean / sd * periods_per_year.sqrt() } else { 0.0 }
        })
        .collect()
}

fn drawdown(curve: &[EquityPoint]) -> Vec<f64> {
    let mut peak = f64::MIN;
    curve
        .iter()
        .map(|p| {
            peak = peak.max(p.equity);
            if peak > 0.0 { p.equity / peak - 1.0 } else { 0.0 }
        })
        .collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn usd(x: f64) -> String {
    let sign = if x < 0.0 { "-" } else { "" };
    let cents = (x.abs() * 100.0).round() as u64;
    let whole = (cents / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}${grouped}.{:02}", cents % 100)
}

/// An SVG line chart of `series` (name, colour, values) over `n` points, with its value range and the
/// first and last dates as labels.
fn chart(
    title: &str,
    n: usize,
    series: &[(&str, &str, Vec<f64>)],
    dates: (&str, &str),
    fmt: fn(f64) -> String,
) -> String {
    let (w, h, pad) = (900.0, 240.0, 44.0);
    let all = series.iter().flat_map(|s| s.2.iter().copied()).filter(|v| v.is_finite());
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo > hi {
        (0.0, 1.0)
    } else if hi - lo < 1e-12 {
        (lo - 1.0, hi + 1.0)
    } else {
        (lo, hi)
    };
    let x = |i: usize| pad + (w - 2.0 * pad) * i as f64 / (n.max(2) - 1) as f64;
    let y = |v: f64| h - pad - (h - 2.0 * pad) * (v - lo) / (hi - lo);
    let mut svg = format!(
        "<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        esc(title)
    );
    let _ = write!(
        svg,
        "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/><text x=\"2\" y=\"{}\">{}</text><text x=\"2\" y=\"{}\">{}</text>\
         <text x=\"{pad}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        h - pad,
        w - pad,
        h - pad,
        y(hi) + 4.0,
        fmt(hi),
        y(lo) + 4.0,
        fmt(lo),
        h - pad + 18.0,
        dates.0,
        w - pad,
        h - pad + 18.0,
        dates.1
    );
    for (name, colour, values) in series {
        let pts: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| format!("{:.1},{:.1}", x(i + n - values.len()), y(*v)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" points=\"{}\"><title>{}</title></polyline>",
            pts.join(" "),
            esc(name)
        );
    }
    let legend: Vec<String> = series
        .iter()
        .map(|(name, colour, _)| format!("<span style=\"color:{colour}\">&#9632;</span> {}", esc(name)))
        .collect();
    let _ = write!(svg, "</svg><p class=\"legend\">{}</p></figure>", legend.join(" &nbsp; "));
    svg
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// What a tear sheet is of, in words: the page's title, its heading and the sentence under it.
pub(crate) struct Heading {
    pub title: String,
    pub heading: String,
    pub lead: String,
}

/// The tear sheet of `r`: `json` is the report as `--json` prints it, `config` the effective config it
/// ran with, `fee_bps` the broker's fee (the round trips' fees), `ppy` bars per year.
pub(crate) fn html(r: &BacktestReport, json: &str, config: &str, fee_bps: f64, ppy: f64) -> String {
    let day = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.date_naive().to_string()).unwrap_or_default();
    let (from, to) = (day(r.from), day(r.to));
    let mode = r.mode;
    let head = Heading {
        title: format!("tradebot backtest {} {from} to {to}", r.model_id),
        heading: format!("Backtest of {} ({mode})", r.model_id),
        lead: format!(
            "{} bars, {from} to {to}; full risk checks and the simulated broker, as the replay daemon trades.",
            r.bars
        ),
    };
    sheet(&head, r, json, config, fee_bps, ppy)
}

/// A tear sheet of `r` under `head`: a backtest's (`html`) or an account's own history (`tradebot
/// report`, `backtest::account`).
pub(crate) fn sheet(head: &Heading, r: &BacktestReport, json: &str, config: &str, fee_bps: f64, ppy: f64) -> String {
    let day = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.date_naive().to_string()).unwrap_or_default();
    let (from, to) = (day(r.from), day(r.to));
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{CSS}</style></head><body><h1>{}</h1><p>{}</p>",
        esc(&head.title),
        esc(&head.heading),
        esc(&head.lead)
    );
    h.push_str(&figures_table(r));
    let n = r.curve.len();
    let dates = (from.as_str(), to.as_str());
    let eq = |f: fn(&EquityPoint) -> f64| r.curve.iter().map(f).collect::<Vec<f64>>();
    h.push_str(&chart(
        "Equity against buy-and-hold and cash",
        n,
        &[
            ("strategy", "#1f6feb", eq(|p| p.equity)),
            ("buy & hold", "#999", eq(|p| p.buy_hold)),
            ("cash", "#2da44e", eq(|p| p.cash)),
        ],
        dates,
        usd,
    ));
    h.push_str(&chart("Drawdown", n, &[("strategy", "#cf222e", drawdown(&r.curve))], dates, pct));
    h.push_str(&chart(
        &format!("Rolling Sharpe ratio ({ROLLING} bars)"),
        n,
        &[("strategy", "#8250df", rolling_sharpe(&r.curve, ROLLING, ppy))],
        dates,
        |v| format!("{v:.2}"),
    ));
    h.push_str(&months_table(&monthly_returns(&r.curve)));
    h.push_str(&symbols_table(&r.fills, fee_bps));
    h.push_str(&trades_table(r));
    let _ = writeln!(
        h,
        "<h2>Configuration</h2><pre>{}</pre><script type=\"application/json\" id=\"report\">{}</script></body></html>",
        esc(config),
        json.replace("</", "<\\/")
    );
    h
}

/// The figures of the strategy, buy-and-hold and cash, side by side.
fn figures_table(r: &BacktestReport) -> String {
    let mut h = String::new();
    let cash = super::Performance::default();
    h.push_str(
        "<h2>Figures</h2><table id=\"figures\"><tr><th></th><th>strategy</th><th>buy &amp; hold</th><th>cash</th></tr>",
    );
    type Row = (&'static str, fn(&super::Performance) -> String);
    let rows: [Row; 9] = [
        ("total return", |m| pct(m.total_return)),
        ("CAGR", |m| pct(m.cagr)),
        ("Sharpe", |m| format!("{:.3}", m.sharpe)),
        ("Sortino", |m| format!("{:.3}", m.sortino)),
        ("max drawdown", |m| pct(m.max_drawdown)),
        ("turnover", |m| format!("{:.2}", m.turnover)),
        ("trades", |m| m.trades.to_string()),
        ("fees", |m| usd(m.fees)),
        ("exposure", |m| format!("{:.1}%", m.exposure * 100.0)),
    ];
    for (name, f) in rows {
        let _ = write!(
            h,
            "<tr><th>{name}</th><td>{}</td><td>{}</td><td>{}</td></tr>",
            f(&r.strategy),
            f(&r.buy_hold),
            f(&cash)
        );
    }
    h.push_str("</table>");
    h
}

/// Every fill, in order.
fn trades_table(r: &BacktestReport) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<h2>Trades ({} fills)</h2><table id=\"trades\"><tr><th>time</th><th>symbol</th><th>side</th><th>qty</th><th>price</th><th>order</th></tr>",
        r.fills.len()
    );
    for f in &r.fills {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            f.time.format("%Y-%m-%d %H:%M:%S"),
            esc(f.symbol.as_str()),
            f.side,
            f.qty,
            usd(f.price.to_f64().unwrap_or(0.0)),
            esc(&f.client_order_id.to_string())
        );
    }
    h.push_str("</table>");
    h
}

fn months_table(months: &[(i32, u32, f64)]) -> String {
    let mut by_year: BTreeMap<i32, [Option<f64>; 12]> = BTreeMap::new();
    for (y, m, r) in months {
        by_year.entry(*y).or_default()[(*m as usize).saturating_sub(1).min(11)] = Some(*r);
    }
    let mut h = String::from("<h2>Monthly returns</h2><table id=\"months\" class=\"heat\"><tr><th></th>");
    for m in ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"] {
        let _ = write!(h, "<th>{m}</th>");
    }
    h.push_str("</tr>");
    for (y, row) in by_year {
        let _ = write!(h, "<tr><th>{y}</th>");
        for r in row {
            match r {
                // Green for gains, red for losses, stronger to ±10 %.
                Some(r) => {
                    let a = (r.abs() / 0.10).min(1.0) * 0.8 + 0.1;
                    let rgb = if r >= 0.0 { "45,164,78" } else { "207,34,46" };
                    let _ = write!(h, "<td style=\"background:rgba({rgb},{a:.2})\">{}</td>", pct(r));
                }
                None => h.push_str("<td></td>"),
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    h
}

fn symbols_table(fills: &[FillRecord], fee_bps: f64) -> String {
    let (closed, open) = round_trips(fills, fee_bps);
    let mut rows: BTreeMap<String, (usize, usize, f64, f64)> = BTreeMap::new();
    for f in fills {
        rows.entry(f.symbol.to_string()).or_default().0 += 1;
    }
    for t in &closed {
        let r = rows.entry(t.symbol.clone()).or_default();
        r.1 += usize::from(t.pnl > 0.0);
        r.2 += t.pnl;
        r.3 += t.fees;
    }
    let mut h = String::from(
        "<h2>Per symbol</h2><table id=\"symbols\"><tr><th>symbol</th><th>fills</th><th>round trips won</th><th>realised P&amp;L</th><th>fees</th><th>held at the end</th></tr>",
    );
    for (sym, (n, won, pnl, fees)) in rows {
        let held = open.iter().find(|(s, _)| s.as_str() == sym).map_or(0.0, |(_, l)| l.qty);
        let _ = write!(
            h,
            "<tr><th>{}</th><td>{n}</td><td>{won}</td><td>{}</td><td>{}</td><td>{held}</td></tr>",
            esc(&sym),
            usd(pnl),
            usd(fees)
        );
    }
    h.push_str("</table>");
    h
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:960px;padding:0 1em;color:#1f2328}\
table{border-collapse:collapse;margin:.5em 0 1.5em;display:block;overflow-x:auto}th,td{padding:3px 8px;text-align:right;border-bottom:1px solid #d0d7de}\
figure{margin:1em 0}svg{width:100%;height:auto}svg text{font-size:12px;fill:#57606a}.axis{stroke:#d0d7de}polyline{stroke-width:1.5}\
.legend{margin:0;color:#57606a}pre{background:#f6f8fa;padding:1em;overflow-x:auto;font-size:12px}";

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn point(y: i32, m: u32, d: u32, equity: f64) -> EquityPoint {
        EquityPoint {
            t: Utc.with_ymd_and_hms(y, m, d, 21, 0, 0).unwrap(),
            equity,
            cash: 0.0,
            buy_hold: 100.0,
            trades: 0,
            fees: 0.0,
        }
    }

    #[test]
    fn monthly_returns_run_from_month_end_to_month_end() {
        let curve = [
            point(2012, 1, 3, 100.0),
            point(2012, 1, 31, 110.0),
            point(2012, 2, 1, 99.0),
            point(2012, 2, 29, 121.0),
            point(2012, 3, 1, 108.9),
        ];
        let got = monthly_returns(&curve);
        let want = [(2012, 1, 0.10), (2012, 2, 0.10), (2012, 3, -0.10)];
        assert_eq!(got.len(), 3);
        for ((y, m, r), (wy, wm, wr)) in got.iter().zip(want) {
            assert_eq!((*y, *m), (wy, wm));
            assert!((r - wr).abs() < 1e-12, "{y}-{m}: {r} != {wr}");
        }
    }

    #[test]
    fn the_rolling_sharpe_is_the_windows_own() {
        let eq = [100.0, 101.0, 100.0, 102.0, 102.0];
        let curve: Vec<_> = eq.iter().enumerate().map(|(i, e)| point(2012, 1, i as u32 + 2, *e)).collect();
        let got = rolling_sharpe(&curve, 3, 252.0);
        assert_eq!(got.len(), 2, "4 returns, windows of 3");
        let r: Vec<f64> = eq.windows(2).map(|w| w[1] / w[0] - 1.0).collect();
        let sharpe = |x: &[f64]| {
            let m = x.iter().sum::<f64>() / 3.0;
            m / (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 3.0).sqrt() * 252f64.sqrt()
        };
        assert!((got[0] - sharpe(&r[0..3])).abs() < 1e-9 && (got[1] - sharpe(&r[1..4])).abs() < 1e-9, "{got:?}");
    }

    #[test]
    fn money_is_grouped_and_signed_and_html_is_escaped() {
        assert_eq!(usd(1234567.891), "$1,234,567.89");
        assert_eq!(usd(-0.5), "-$0.50");
        assert_eq!(usd(999.999), "$1,000.00");
        assert_eq!(esc("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
    }
}
