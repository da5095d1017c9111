//! Figures for people: whole numbers without decimals (`updates=13`, not `13.0000`), others to four
//! decimals, and NaN or infinities spelled as they are; money to the cent with thousands separators.

/// A figure for a log or a report: a whole number without decimals, any other to four decimals, NaN and
/// infinities as Rust spells them.
pub fn figure(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v:.4}") }
}

/// A decimal amount of money to the cent, as `money` writes it.
pub fn money_dec(x: rust_decimal::Decimal) -> String {
    use rust_decimal::prelude::ToPrimitive;
    money(x.round_dp(2).to_f64().unwrap_or(f64::NAN))
}

/// Money to the cent, with thousands separators: 100123.456 → "100,123.46".
pub fn money(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let cents = (x.abs() * 100.0).round() as u64;
    let (units, cents) = (cents / 100, cents % 100);
    format!("{}{}.{cents:02}", if x < 0.0 { "-" } else { "" }, count(units))
}

/// Seconds as `1h02m`, `3m05s` or `42s` (an ETA, a wait).
pub fn duration_words(secs: f64) -> String {
    let s = if secs.is_finite() { secs.max(0.0).round() as u64 } else { 0 };
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// A count with thousands separators: 32768 → "32,768".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Serializes a map of figures with the whole ones as JSON integers (`"updates": 2`, not `2.0`); the
/// others as they are. For `#[serde(serialize_with = "crate::domain::number::whole_as_int")]`: a
/// reader of the JSON (serde's `f64` included) takes either.
pub fn whole_as_int<S: serde::Serializer>(
    map: &std::collections::BTreeMap<String, f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(map.len()))?;
    for (k, v) in map {
        // Integers an f64 holds exactly (below 2^53).
        if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
            m.serialize_entry(k, &(*v as i64))?;
        } else {
            m.serialize_entry(k, v)?;
        }
    }
    m.end()
}

#[cfg(test)]
mod tests {
    /// `train --json` printed `"updates": 2.0`: whole figures are integers in JSON, and read back.
    #[test]
    fn whole_figures_are_json_integers() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct M {
            #[serde(serialize_with = "super::whole_as_int")]
            metrics: std::collections::BTreeMap<String, f64>,
        }
        let m = M { metrics: [("updates".to_string(), 2.0), ("approx_kl".to_string(), 0.0072)].into_iter().collect() };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text, r#"{"metrics":{"approx_kl":0.0072,"updates":2}}"#);
        let back: M = serde_json::from_str(&text).unwrap();
        assert_eq!(back.metrics["updates"], 2.0);
    }

    #[test]
    fn whole_numbers_have_no_decimals() {
        assert_eq!(super::figure(13.0), "13");
        assert_eq!(
            (super::count(32_768), super::count(999), super::count(1_000_000)),
            ("32,768".into(), "999".into(), "1,000,000".into())
        );
        assert_eq!(super::figure(-2.0), "-2");
        assert_eq!(super::figure(0.12345), "0.1235");
        assert_eq!(super::figure(f64::NAN), "NaN");
        assert_eq!(super::figure(1e20), "100000000000000000000.0000");
    }

    #[test]
    fn money_is_cents_with_separators() {
        assert_eq!(super::money(100123.456), "100,123.46");
        assert_eq!(super::money(-1234.5), "-1,234.50");
        assert_eq!(super::money(0.004), "0.00");
        assert_eq!(super::money(999.996), "1,000.00");
    }
}
