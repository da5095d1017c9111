//! Line charts as SVG, rendered by the server: no JavaScript, no chart library, nothing from a CDN.
//! Values that are NaN or infinite are skipped (the line breaks there); an empty chart says so.

use std::fmt::Write;

pub(crate) struct Series<'a> {
    pub name: &'a str,
    /// A CSS colour.
    pub colour: &'a str,
    pub values: &'a [f64],
}

const W: f64 = 640.0;
const H: f64 = 200.0;
const PAD_L: f64 = 64.0;
const PAD_R: f64 = 8.0;
const PAD_T: f64 = 18.0;
const PAD_B: f64 = 20.0;

/// Escapes text for HTML and SVG.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A point marked on a chart: a triangle up (a buy, below the price) or down (a sell, above it), with
/// its label as a tooltip.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Marker {
    pub index: usize,
    pub value: f64,
    pub up: bool,
    pub label: String,
}

/// A chart of several series over the same x positions (index), with the y range of all of them and
/// `x_labels` (first, last) under the axis. `id` becomes the element id.
pub(crate) fn line_chart(id: &str, series: &[Series<'_>], x_labels: (&str, &str), fmt_y: fn(f64) -> String) -> String {
    chart_with_markers(id, series, &[], x_labels, fmt_y)
}

/// `line_chart` with `markers` on it (those outside the x range are left out).
pub(crate) fn chart_with_markers(
    id: &str,
    series: &[Series<'_>],
    markers: &[Marker],
    x_labels: (&str, &str),
    fmt_y: fn(f64) -> String,
) -> String {
    let mut o = String::new();
    let _ = write!(o, r#"<svg id="{}" class="chart" viewBox="0 0 {W} {H}" role="img">"#, esc(id));
    let Some(frame) = Frame::of(series) else {
        let _ = write!(o, r#"<text x="{}" y="{}" class="empty">no data yet</text></svg>"#, W / 2.0 - 40.0, H / 2.0);
        return o;
    };
    frame.axes(&mut o, x_labels, fmt_y);
    for (k, s) in series.iter().enumerate() {
        frame.line(&mut o, k, s);
    }
    for m in markers.iter().filter(|m| m.index < frame.n && m.value.is_finite()) {
        frame.marker(&mut o, m);
    }
    o.push_str("</svg>");
    o
}

/// A chart's scales: `n` x positions (index) across the plot, and the y range `lo..hi` of every finite value.
struct Frame {
    n: usize,
    lo: f64,
    hi: f64,
}

impl Frame {
    /// The scales of `series`; `None` with fewer than two positions or no finite value.
    fn of(series: &[Series<'_>]) -> Option<Frame> {
        let finite = series.iter().flat_map(|s| s.values.iter().copied()).filter(|v| v.is_finite());
        let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let n = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
        if n < 2 || !lo.is_finite() {
            return None;
        }
        let (lo, hi) = if hi - lo < 1e-12 { (lo - 1.0, hi + 1.0) } else { (lo, hi) };
        Some(Frame { n, lo, hi })
    }

    fn x(&self, i: usize) -> f64 {
        PAD_L + (W - PAD_L - PAD_R) * i as f64 / (self.n - 1) as f64
    }

    fn y(&self, v: f64) -> f64 {
        PAD_T + (H - PAD_T - PAD_B) * (1.0 - (v - self.lo) / (self.hi - self.lo))
    }

    /// The two axes, the y range's ends and `x_labels` (first, last) under the x axis.
    fn axes(&self, o: &mut String, x_labels: (&str, &str), fmt_y: fn(f64) -> String) {
        let _ = write!(
            o,
            r##"<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{yb}" stroke="#999"/><line x1="{PAD_L}" y1="{yb}" x2="{xr}" y2="{yb}" stroke="#999"/>"##,
            yb = H - PAD_B,
            xr = W - PAD_R
        );
        let _ = write!(o, r#"<text x="2" y="{}" class="tick">{}</text>"#, PAD_T + 4.0, esc(&fmt_y(self.hi)));
        let _ = write!(o, r#"<text x="2" y="{}" class="tick">{}</text>"#, H - PAD_B, esc(&fmt_y(self.lo)));
        let _ = write!(o, r#"<text x="{PAD_L}" y="{}" class="tick">{}</text>"#, H - 4.0, esc(x_labels.0));
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>"#,
            W - PAD_R,
            H - 4.0,
            esc(x_labels.1)
        );
    }

    /// Series `k`'s line (broken where a value is not finite) and its legend entry.
    fn line(&self, o: &mut String, k: usize, s: &Series<'_>) {
        let mut d = String::new();
        let mut pen_up = true;
        for (i, v) in s.values.iter().enumerate() {
            if !v.is_finite() {
                pen_up = true;
                continue;
            }
            let _ = write!(d, "{}{:.1},{:.1} ", if pen_up { "M" } else { "L" }, self.x(i), self.y(*v));
            pen_up = false;
        }
        let _ = write!(
            o,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="1.5"><title>{}</title></path>"#,
            d.trim_end(),
            esc(s.colour),
            esc(s.name)
        );
        let _ = write!(
            o,
            r#"<text x="{}" y="12" fill="{}" class="legend">{}</text>"#,
            PAD_L + 8.0 + 130.0 * k as f64,
            esc(s.colour),
            esc(s.name)
        );
    }

    /// A buy's triangle up below its value or a sell's down above it (clamped into the y range).
    fn marker(&self, o: &mut String, m: &Marker) {
        let (cx, cy) = (self.x(m.index), self.y(m.value.clamp(self.lo, self.hi)));
        let (points, colour, class) = if m.up {
            (
                format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", cx, cy + 3.0, cx - 4.0, cy + 10.0, cx + 4.0, cy + 10.0),
                "#1e7e34",
                "buy",
            )
        } else {
            (
                format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", cx, cy - 3.0, cx - 4.0, cy - 10.0, cx + 4.0, cy - 10.0),
                "#c0392b",
                "sell",
            )
        };
        let _ = write!(
            o,
            r#"<polygon class="{class}" points="{points}" fill="{colour}"><title>{}</title></polygon>"#,
            esc(&m.label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(v: f64) -> String {
        format!("{v:.0}")
    }

    #[test]
    fn draws_each_series_within_the_box_and_breaks_at_nan() {
        let a = [100.0, 110.0, f64::NAN, 90.0, 120.0];
        let b = [100.0, 101.0, 102.0, 103.0, 104.0];
        let svg = line_chart(
            "eq",
            &[
                Series { name: "equity", colour: "#06c", values: &a },
                Series { name: "b&h", colour: "#999", values: &b },
            ],
            ("2004-01-02", "2013-03-01"),
            plain,
        );
        assert_eq!(svg.matches("<path").count(), 2);
        // The NaN starts a new sub-path: two "M" commands in the first path.
        let first = svg.split("<path d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(first.matches('M').count(), 2, "{first}");
        // Every point lies inside the view box.
        for p in first.split(' ') {
            let (x, y) = p.trim_start_matches(['M', 'L']).split_once(',').unwrap();
            let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
            assert!((PAD_L..=W).contains(&x) && (0.0..=H).contains(&y), "{p}");
        }
        assert!(svg.contains(">120<") && svg.contains(">90<"), "y range labels: {svg}");
        assert!(svg.contains("b&amp;h") && !svg.contains("b&h"), "names are escaped");
    }

    #[test]
    fn buys_and_sells_are_marked_where_they_happened() {
        let close = [10.0, 11.0, 12.0, 11.5];
        let marks = [
            Marker { index: 1, value: 11.0, up: true, label: "buy 5 at 11.00".into() },
            Marker { index: 3, value: 11.5, up: false, label: "sell 5 at 11.50".into() },
            Marker { index: 9, value: 11.0, up: true, label: "outside".into() },
        ];
        let svg = chart_with_markers(
            "p",
            &[Series { name: "close", colour: "#06c", values: &close }],
            &marks,
            ("a", "b"),
            plain,
        );
        assert_eq!(svg.matches(r#"class="buy""#).count(), 1);
        assert_eq!(svg.matches(r#"class="sell""#).count(), 1);
        assert!(svg.contains("<title>buy 5 at 11.00</title>") && !svg.contains("outside"), "{svg}");
        // The buy's triangle points up from just below its price, at its bar.
        let buy = svg.split(r#"class="buy" points=""#).nth(1).unwrap().split('"').next().unwrap();
        let tip: Vec<f64> = buy.split(' ').next().unwrap().split(',').map(|v| v.parse().unwrap()).collect();
        let x1 = PAD_L + (W - PAD_L - PAD_R) / 3.0;
        assert!((tip[0] - x1).abs() < 0.06, "{buy}");
    }

    #[test]
    fn an_empty_or_flat_chart_renders() {
        assert!(line_chart("x", &[], ("", ""), plain).contains("no data yet"));
        let flat = [5.0, 5.0, 5.0];
        let svg = line_chart("x", &[Series { name: "f", colour: "red", values: &flat }], ("a", "b"), plain);
        assert!(svg.contains("<path") && !svg.contains("NaN"), "{svg}");
    }
}
