//! The search page (`/search`): each stored hyper-parameter study, the latest first: the best value so far
//! by trial, how each parameter ranks with the outcome (Spearman's rank correlation over the trials that
//! were judged, as a signed bar), and the trials table (state, steps, value at each rung, parameters).

use super::svg::{Series, esc, line_chart};
use crate::retrain::study_record::{StudyRecord, TrialRecord};
use std::fmt::Write;

const STYLE: &str = include_str!("style.css");

/// Ranks (1-based, ties averaged).
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's rank correlation of `xs` and `ys`; `None` with fewer than 3 pairs or a constant side.
pub(crate) fn spearman(xs: &[f64], ys: &[f64]) -> Option<f64> {
    if xs.len() != ys.len() || xs.len() < 3 {
        return None;
    }
    let (rx, ry) = (ranks(xs), ranks(ys));
    let n = rx.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

/// Each parameter's rank correlation with the trials' outcome (furthest rung first, then value).
pub(crate) fn importance(s: &StudyRecord) -> Vec<(String, f64)> {
    let judged: Vec<&TrialRecord> = s.trials.iter().filter(|t| t.value().is_some_and(f64::is_finite)).collect();
    let outcome: Vec<f64> =
        judged.iter().map(|t| t.curve.len() as f64 * 1e6 + t.rank_key().1.clamp(-1e5, 1e5)).collect();
    let mut out: Vec<(String, f64)> = s
        .space
        .keys()
        .filter_map(|name| {
            let xs: Vec<f64> = judged.iter().map(|t| t.params.get(name).copied().unwrap_or(f64::NAN)).collect();
            spearman(&xs, &outcome).map(|r| (name.clone(), r))
        })
        .collect();
    out.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    out
}

/// The page: rendered once; its script puts the studies in place again (`/api/v1/search`) whenever the
/// dashboard's event stream carries different ones, so the page never reloads itself.
pub(crate) fn render(studies: &[StudyRecord]) -> String {
    let mut o = String::with_capacity(16 * 1024);
    let _ = write!(
        o,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>tradebot · search</title><style>{STYLE}</style></head><body><header><h1>tradebot</h1><a href="/">dashboard</a><span id="live" class="live" title="updates from the daemon">●</span></header><div id="studies">{}</div><script>{SEARCH_JS}</script></body></html>"#,
        self::studies(studies)
    );
    o
}

/// The studies as the page shows them (what `/api/v1/search` answers).
pub(crate) fn studies(studies: &[StudyRecord]) -> String {
    let mut o = String::new();
    if studies.is_empty() {
        o.push_str("<section><h2>Hyper-parameter searches</h2><p>none yet: <code>tradebot tune ppo</code>, or <code>retrain.tune = true</code></p></section>");
    }
    for s in studies {
        study(&mut o, s);
    }
    o
}

/// The search page's script: on each update of the dashboard's event stream whose studies differ from
/// the last ones seen, the studies' HTML is fetched and put in place.
const SEARCH_JS: &str = r#"(() => {
  let last = null;
  const live = document.getElementById("live");
  const events = new EventSource("/api/v1/events");
  events.addEventListener("update", async (ev) => {
    if (live) live.className = "live on";
    let key;
    try { key = JSON.stringify(JSON.parse(ev.data).data.studies || []); } catch (e) { return; }
    if (key === last) return;
    const first = last === null;
    last = key;
    const r = await fetch("/api/v1/search", { credentials: "same-origin" });
    if (!r.ok) return;
    const j = await r.json();
    const box = document.getElementById("studies");
    if (box && (!first || box.innerHTML !== j.html)) box.innerHTML = j.html;
  });
  events.onerror = () => { if (live) live.className = "live off"; };
})();"#;

fn study(o: &mut String, s: &StudyRecord) {
    let _ = write!(
        o,
        r#"<section class="study" data-name="{}"><h2>{} · {} · {} sampler · {} of {} trials</h2>"#,
        esc(&s.name),
        esc(&s.name),
        esc(&s.trigger),
        esc(&s.sampler),
        s.trials.len(),
        s.trials_planned
    );
    match (s.best_trial(), &s.model_id, &s.error) {
        (Some(b), Some(m), _) => {
            let _ = write!(o, r#"<p class="best">best: trial <b>{}</b>, candidate {}</p>"#, b.number, esc(m));
        }
        (_, _, Some(e)) => {
            let _ = write!(o, r#"<p class="bad">{}</p>"#, esc(e));
        }
        (Some(b), None, _) => {
            let _ = write!(o, r#"<p class="best">best so far: trial <b>{}</b> (under way)</p>"#, b.number);
        }
        _ => o.push_str("<p>under way</p>"),
    }
    let best: Vec<f64> = s.best_so_far().into_iter().map(|(_, v)| v).collect();
    if best.len() > 1 {
        let label = format!("best validation {} so far, by trial", s.metric);
        let _ = write!(o, "<h3>{}</h3>", esc(&label));
        let last = s.trials.last().map_or(0, |t| t.number);
        let series = [Series { name: &s.metric, colour: "#2a7", values: &best }];
        o.push_str(&line_chart(&format!("best-{}", esc(&s.name)), &series, ("0", &last.to_string()), |v| {
            format!("{v:.2}")
        }));
    }
    let imp = importance(s);
    if !imp.is_empty() {
        o.push_str("<h3>parameters against the outcome (rank correlation)</h3><table class=\"importance\">");
        for (name, r) in &imp {
            let width = (r.abs() * 200.0).round();
            let colour = if *r >= 0.0 { "#2a7" } else { "#c44" };
            let _ = write!(
                o,
                r#"<tr><td>{}</td><td class="rho" data-value="{r}">{r:+.2}</td><td><span style="display:inline-block;height:0.8em;width:{width}px;background:{colour}"></span></td></tr>"#,
                esc(name)
            );
        }
        o.push_str("</table>");
    }
    o.push_str("<h3>trials</h3><table class=\"trials\"><tr><th>trial</th><th>state</th><th>steps</th><th>value</th><th>rungs</th><th>parameters</th></tr>");
    for t in &s.trials {
        let rungs: Vec<String> = t.curve.iter().map(|r| format!("{:.3}", r.value)).collect();
        let params: Vec<String> =
            t.params.iter().map(|(k, v)| format!("{k}={}", crate::tune::space::show(k, *v))).collect();
        let value = t.value().unwrap_or(f64::NAN);
        let _ = write!(
            o,
            r#"<tr class="trial {}" data-number="{}"><td>{}</td><td>{}</td><td>{}</td><td class="value" data-value="{value}">{}</td><td>{}</td><td><small>{}</small></td></tr>"#,
            t.state.as_str(),
            t.number,
            t.number,
            t.state.as_str(),
            t.curve.last().map_or(0, |r| r.steps),
            if value.is_finite() { format!("{value:.3}") } else { "-".into() },
            esc(&rungs.join(" → ")),
            esc(&t.error.clone().unwrap_or_else(|| params.join(" ")))
        );
    }
    o.push_str("</table></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrain::study_record::{RungValue, TrialState};
    use std::collections::BTreeMap;

    #[test]
    fn spearman_is_one_for_monotone_and_minus_one_for_reversed() {
        let xs = [1.0, 2.0, 3.0, 10.0];
        assert!((spearman(&xs, &[0.1, 0.5, 0.7, 0.9]).unwrap() - 1.0).abs() < 1e-12);
        assert!((spearman(&xs, &[9.0, 5.0, 1.0, 0.0]).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(spearman(&xs, &[1.0, 1.0, 1.0, 1.0]), None);
        assert_eq!(ranks(&[3.0, 1.0, 3.0]), [2.5, 1.0, 2.5]);
    }

    fn trial(number: usize, lr: f64, values: &[f64], state: TrialState) -> TrialRecord {
        TrialRecord {
            number,
            state,
            params: BTreeMap::from([("learning_rate".into(), lr), ("gamma".into(), [0.97, 0.99, 0.95, 0.98][number])]),
            seed: number as u64,
            curve: values.iter().enumerate().map(|(i, v)| RungValue { steps: 64 << i, value: *v }).collect(),
            metrics: BTreeMap::new(),
            started_at: chrono::Utc::now(),
            ended_at: None,
            error: None,
        }
    }

    /// Higher learning rates went further here: its correlation is +1 and first; the page shows the best
    /// trial, its curve and every trial.
    #[test]
    fn the_page_ranks_parameters_and_lists_trials() {
        let s = StudyRecord {
            name: "tune-1".into(),
            trigger: "command line".into(),
            sampler: "tpe".into(),
            seed: 1,
            metric: "sharpe".into(),
            space: crate::config::default_space()
                .into_iter()
                .filter(|(k, _)| k == "learning_rate" || k == "gamma")
                .collect(),
            rungs: vec![64, 128],
            reduction: 3,
            parallel: 2,
            trials_planned: 4,
            validation_from: None,
            validation_to: None,
            started_at: chrono::Utc::now(),
            ended_at: None,
            trials: vec![
                trial(0, 1e-5, &[0.1], TrialState::Pruned),
                trial(1, 1e-4, &[0.5], TrialState::Pruned),
                trial(2, 3e-4, &[0.7, 0.8], TrialState::Complete),
                trial(3, 1e-3, &[0.9, 1.2], TrialState::Complete),
            ],
            best: Some(3),
            model_id: Some("ppo-abc".into()),
            error: None,
        };
        let imp = importance(&s);
        assert_eq!(imp[0].0, "learning_rate");
        assert!((imp[0].1 - 1.0).abs() < 1e-12, "{imp:?}");
        assert!(imp[1].0 == "gamma" && imp[1].1.abs() < 0.9, "{imp:?}");
        let html = render(std::slice::from_ref(&s));
        assert!(html.contains("best: trial <b>3</b>, candidate ppo-abc"), "{html}");
        assert!(html.contains(r#"id="best-tune-1""#), "the best-so-far chart");
        assert_eq!(html.matches(r#"<tr class="trial "#).count(), 4);
        assert!(html.contains(r#"data-number="2"><td>2</td><td>complete</td><td>128</td>"#), "{html}");
        assert_eq!(s.best_so_far(), [(0, 0.1), (1, 0.5), (2, 0.8), (3, 1.2)]);
    }
}
