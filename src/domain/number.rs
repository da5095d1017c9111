//! A figure for people: whole numbers without decimals (`updates=13`, not `13.0000`), others to four
//! decimals, and NaN or infinities spelled as they are.

pub fn figure(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v:.4}") }
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
}
