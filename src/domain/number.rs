//! Figures for people: whole numbers without decimals (`updates=13`, not `13.0000`), others to four
//! decimals, and NaN or infinities spelled as they are; money to the cent with thousands separators.

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
    let digits = units.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{}{out}.{cents:02}", if x < 0.0 { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    #[test]
    fn whole_numbers_have_no_decimals() {
        assert_eq!(super::figure(13.0), "13");
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
