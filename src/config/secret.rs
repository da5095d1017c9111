//! `Secret`: a string that never prints. Alpaca keys live in one from the moment they are read.

use serde::{Serialize, Serializer};
use std::fmt;

/// A secret value. `Debug`, `Display` and `Serialize` all print `<masked>`; only `expose()` gives the value,
/// and the only callers are the places that put it in a request header.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<masked>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<masked>")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<masked>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value() {
        let s = Secret::new("PKTOPSECRET");
        assert_eq!(format!("{s}"), "<masked>");
        assert_eq!(format!("{s:?}"), "<masked>");
        assert_eq!(format!("{:?}", Some(&s)), "Some(<masked>)");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"<masked>\"");
        assert_eq!(s.expose(), "PKTOPSECRET");
    }
}
