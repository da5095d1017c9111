//! How the dashboard writes figures and times: money in dollars, shares, percentages, dates for daily bars
//! and seconds otherwise, and table cells carrying their exact value.

use super::data::DashboardData;
use super::svg::esc;

/// "$1,234.56" (US dollars, the account's currency); "-" for a value that is not a number.
pub(crate) fn money(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let cents = (v.abs() * 100.0).round() as u128;
    let (whole, frac) = (cents / 100, cents % 100);
    let digits = whole.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{}${grouped}.{frac:02}", if v < 0.0 && cents > 0 { "-" } else { "" })
}

pub(crate) fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// A time as people read it: the date for daily bars, to the second otherwise.
pub(crate) fn when(t: &chrono::DateTime<chrono::Utc>, daily: bool) -> String {
    if daily { t.format("%Y-%m-%d").to_string() } else { t.format("%Y-%m-%d %H:%M:%S UTC").to_string() }
}

/// Whether the data's bars are daily (dates, not times, on the page and the charts).
pub(crate) fn daily(d: &DashboardData) -> bool {
    d.timeframe.is_empty() || d.timeframe.ends_with("Day") || d.timeframe.ends_with("Week")
}

/// " · GPU 97% busy · 5.1 GB · 310 W" after a training run's progress bar.
pub(crate) fn gpu_html(g: super::data::GpuNow) -> String {
    let power = g.power_w.map(|w| format!(" · {w:.0} W")).unwrap_or_default();
    format!(
        r#" · <span class="gpu" data-busy="{}">GPU {:.0}% busy · {:.1} GB{power}</span>"#,
        g.busy_pct,
        g.busy_pct,
        g.memory_mb / 1024.0
    )
}

pub(crate) fn num(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() { format!("{v:.0}") } else { format!("{v:.4}") }
}

/// A `<td>` showing `shown` and carrying the exact value.
pub(crate) fn td(class: &str, v: f64, shown: &str) -> String {
    format!(r#"<td class="{class}" data-value="{v}">{}</td>"#, esc(shown))
}
