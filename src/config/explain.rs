//! A config file that TOML or serde refuses, explained in plain words: the key (with its section and
//! line), what was given, what is expected with an example written in the file's own syntax, and for a
//! misspelt key the closest valid one. The examples are the defaults of the effective configuration
//! (`Config::to_toml`), so they cannot drift from what the parser takes.

use super::RawConfig;
use super::checker::Invalid;
use toml::Value;

/// `text` deserialized, or one problem in words.
pub(super) fn deserialize(text: &str) -> Result<RawConfig, Invalid> {
    let de = toml::Deserializer::parse(text).map_err(|e| Invalid::Value(e.to_string().trim_end().to_string()))?;
    serde_path_to_error::deserialize::<_, RawConfig>(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let line = inner.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        Invalid::Value(explain(&path, inner.message(), line))
    })
}

/// The closest of `options` to `name`, when it is close enough to be a likely misspelling.
pub(super) fn closest<'a>(name: &str, options: &[&'a str]) -> Option<&'a str> {
    options
        .iter()
        .map(|o| (strsim::damerau_levenshtein(name, o), *o))
        .filter(|(d, o)| *d <= 2.max(o.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, o)| o)
}

/// The names between backticks in serde's "expected one of `a`, `b`" (or "expected `a`").
fn backticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

fn explain(path: &str, message: &str, line: Option<usize>) -> String {
    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
    // serde's path names the key being read; "?" or "." when the error is about the table itself.
    let path = path.trim_start_matches('.');
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let names = backticked(rest);
        let Some((given, valid)) = names.split_first() else { return format!("{path}{at}: {message}") };
        let section = section_of(path, given);
        let place = if section.is_empty() { "at the top level".to_string() } else { format!("in [{section}]") };
        let key = if section.is_empty() { given.to_string() } else { format!("{section}.{given}") };
        return match closest(given, valid) {
            Some(near) => format!("{key}{at}: unknown key {place}; did you mean `{near}`?"),
            None if valid.is_empty() => format!("{key}{at}: unknown key {place}, which takes no keys"),
            None => format!("{key}{at}: unknown key {place}; the keys there are {}", valid.join(", ")),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let names = backticked(rest);
        if let Some((given, valid)) = names.split_first() {
            let hint = closest(given, valid).map(|n| format!("did you mean \"{n}\"? ")).unwrap_or_default();
            let list: Vec<String> = valid.iter().map(|v| format!("\"{v}\"")).collect();
            return format!("{path} = \"{given}\"{at}: {hint}must be one of {}", list.join(", "));
        }
    }
    let typed = message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: "));
    if let Some((given, expected)) = typed.and_then(|r| r.split_once(", expected ")) {
        return wrong_type(path, &at, given, expected);
    }
    format!("{path}{at}: {message}")
}

/// The section of a key: serde's path without the key itself (the path names the key for some errors,
/// only its table for others).
fn section_of<'a>(path: &'a str, key: &str) -> &'a str {
    let p = path.strip_suffix(key).map(|p| p.trim_end_matches('.')).unwrap_or(path);
    if p == "?" { "" } else { p }
}

/// serde's "integer `5`" / "string \"x\"" as the TOML that was written, with the kind of value.
fn given_value(given: &str) -> (String, &'static str) {
    let unquote = |s: &str| s.trim_matches('`').to_string();
    if let Some(s) = given.strip_prefix("string ") {
        return (s.to_string(), "text");
    }
    if let Some(s) = given.strip_prefix("integer ") {
        return (unquote(s), "a number");
    }
    if let Some(s) = given.strip_prefix("floating point ") {
        return (unquote(s), "a number");
    }
    if let Some(s) = given.strip_prefix("boolean ") {
        return (unquote(s), "true/false");
    }
    match given {
        "sequence" => ("[...]".into(), "a list"),
        "map" => ("{...}".into(), "a table"),
        other => (other.to_string(), "a value"),
    }
}

fn wrong_type(path: &str, at: &str, given: &str, expected: &str) -> String {
    let (value, given_kind) = given_value(given);
    let key = path.rsplit('.').next().unwrap_or(path);
    let wanted = match expected {
        "f64" | "f32" => "a number",
        "u64" | "u32" | "u16" | "u8" | "usize" => "a whole number (0 or more)",
        "i64" | "i32" => "a whole number",
        "a string" => "text in double quotes",
        "a boolean" => "true or false",
        "a sequence" => "a list in brackets",
        other => other,
    };
    let unit = unit_of(key).map(|u| format!(" ({u})")).unwrap_or_default();
    // A number where text is wanted: money and other decimals are strings (so that no digit is lost), and
    // a key whose default is such a string is told to quote the number it was given.
    let default = default_of(path);
    let decimal_text = default.as_deref().is_some_and(|d| {
        d.strip_prefix('"').and_then(|d| d.strip_suffix('"')).is_some_and(|d| d.parse::<f64>().is_ok())
    });
    let example = match default {
        _ if expected == "a string" && given_kind == "a number" && decimal_text => {
            format!("write it in quotes: {key} = \"{value}\"")
        }
        Some(d) => format!("e.g. {key} = {d}"),
        None => String::new(),
    };
    let sep = if example.is_empty() { "" } else { "; " };
    format!("{path} = {value}{at}: {given_kind} where {wanted} is expected{unit}{sep}{example}")
}

/// What a key's number means, from its name's suffix (the config's naming convention).
fn unit_of(key: &str) -> Option<&'static str> {
    let units = [
        ("_pct", "a fraction: 0.4 means 40%"),
        ("_bps", "basis points: 10 means 0.1%"),
        ("_secs", "seconds"),
        ("_mins", "minutes"),
        ("_days", "days"),
        ("_mb", "MiB"),
    ];
    units.iter().find(|(s, _)| key.ends_with(s)).map(|(_, u)| *u)
}

/// The key's value in the effective configuration of a minimal config (its default), as TOML.
fn default_of(path: &str) -> Option<String> {
    let minimal = "[market]\nsymbols = [\"AAPL\"]\n";
    let raw: RawConfig = toml::from_str(minimal).ok()?;
    let text = super::Config::from_raw(std::path::Path::new("defaults"), raw).ok()?.to_toml();
    let mut cur = Value::Table(text.parse::<toml::Table>().ok()?);
    for part in path.split('.') {
        cur = cur.get(part)?.clone();
    }
    (!cur.is_table()).then(|| cur.to_string())
}
