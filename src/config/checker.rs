//! The checks every section's values pass while the file is parsed, each failure a problem that names
//! the key, the value and the fix; every problem of a file is collected, so one run reports all of them.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use url::Url;

/// What is wrong with one value of the configuration (or of the environment a run reads it with); the
/// message names the key, the value and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Invalid {
    /// A whole number outside its range.
    #[error("{key} = {value}: must be a whole number in [{lo}, {hi}]")]
    OutOfRange { key: String, value: u64, lo: u64, hi: u64 },
    /// Any other check, in its own words.
    #[error("{0}")]
    Value(String),
}

/// `key = value` within [lo, hi], or the problem naming the key, the value and the range (the sections
/// that check themselves: `[ppo]`, `[sac]`, `[lstm]`, `[tune]`).
pub(crate) fn within(key: &str, value: u64, lo: u64, hi: u64) -> Result<(), Invalid> {
    if (lo..=hi).contains(&value) { Ok(()) } else { Err(Invalid::OutOfRange { key: key.to_string(), value, lo, hi }) }
}

/// Collects problems while parsing, so one run reports all of them.
#[derive(Default)]
pub(super) struct Checker {
    pub(super) problems: Vec<String>,
}

impl Checker {
    pub(super) fn problem(&mut self, p: String) {
        self.problems.push(p);
    }

    /// The problem of a section that checks itself (`validate`), if any.
    pub(super) fn check<E: std::fmt::Display>(&mut self, r: Result<(), E>) {
        if let Err(e) = r {
            self.problem(e.to_string());
        }
    }

    pub(super) fn choice<T: Copy>(&mut self, key: &str, v: Option<&str>, default: &str, options: &[(&str, T)]) -> T {
        let v = v.unwrap_or(default);
        if let Some((_, t)) = options.iter().find(|(name, _)| *name == v) {
            return *t;
        }
        let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
        self.problem(format!("{key} = {v:?}: must be one of {}", names.join(", ")));
        options[0].1
    }

    /// A whole number in [lo, hi].
    pub(super) fn count(&mut self, key: &str, v: Option<u64>, default: u64, lo: u64, hi: u64) -> u64 {
        let x = v.unwrap_or(default);
        if (lo..=hi).contains(&x) {
            return x;
        }
        self.problem(format!("{key} = {x}: must be a whole number in [{lo}, {hi}]"));
        default
    }

    /// An optional whole number in [lo, hi] (`None` stays `None`).
    pub(super) fn count_opt(&mut self, key: &str, v: Option<u64>, lo: u64, hi: u64) -> Option<u64> {
        let x = v?;
        if (lo..=hi).contains(&x) {
            return Some(x);
        }
        self.problem(format!("{key} = {x}: must be a whole number in [{lo}, {hi}] (or omit it)"));
        None
    }

    /// A number in a range; each bound is (value, inclusive).
    pub(super) fn range(&mut self, key: &str, v: Option<f64>, default: f64, lo: (f64, bool), hi: (f64, bool)) -> f64 {
        let x = v.unwrap_or(default);
        let above = if lo.1 { x >= lo.0 } else { x > lo.0 };
        let below = if hi.1 { x <= hi.0 } else { x < hi.0 };
        if x.is_finite() && above && below {
            return x;
        }
        let (l, r) = (if lo.1 { '[' } else { '(' }, if hi.1 { ']' } else { ')' });
        self.problem(format!("{key} = {x}: must be in {l}{}, {}{r}", lo.0, hi.0));
        default
    }

    pub(super) fn url(&mut self, key: &str, v: Option<&str>, default: &str, schemes: &[&str]) -> Url {
        let s = v.unwrap_or(default);
        match Url::parse(s) {
            Ok(u) if schemes.contains(&u.scheme()) && u.host_str().is_some() => u,
            Ok(u) => {
                self.problem(format!(
                    "{key} = {s:?}: scheme {:?} is not allowed here; use {}://",
                    u.scheme(),
                    schemes.join(":// or ")
                ));
                Url::parse(default).unwrap_or(u)
            }
            Err(e) => {
                self.problem(format!("{key} = {s:?}: not a URL ({e}); e.g. {default}"));
                Url::parse(default).unwrap_or_else(|_| Url::parse("http://127.0.0.1/").expect("literal URL parses"))
            }
        }
    }

    pub(super) fn date(&mut self, key: &str, v: Option<&str>) -> Option<NaiveDate> {
        let s = v?;
        match NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            Ok(d) => Some(d),
            Err(_) => {
                self.problem(format!("{key} = {s:?}: not a date; write YYYY-MM-DD"));
                None
            }
        }
    }

    pub(super) fn positive_decimal(&mut self, key: &str, v: Option<&str>, default: &str) -> Decimal {
        let s = v.unwrap_or(default);
        match s.trim().parse::<Decimal>() {
            Ok(d) if d > Decimal::ZERO => d,
            _ => {
                self.problem(format!(
                    "{key} = {s:?}: must be a decimal number above zero, written as a string, e.g. \"{default}\""
                ));
                default.parse().unwrap_or(Decimal::ONE)
            }
        }
    }
}
