//! The effective configuration as TOML (`tradebot config check`), written in the file's own keys so that
//! it parses back to the same configuration: durations as `*_secs`, the environment's execution rule
//! flat in `[env]`, the promotion gate flat in `[retrain]`, the schedule and its time zone apart.

use super::Config;
use toml::Value;
use toml::map::Map;

/// Moves `from` to `to` in `t` (when present), mapping the value.
fn rename(t: &mut Map<String, Value>, from: &str, to: &str, f: impl Fn(Value) -> Value) {
    if let Some(v) = t.remove(from) {
        t.insert(to.to_string(), f(v));
    }
}

fn table<'a>(root: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    root.get_mut(key).and_then(Value::as_table_mut)
}

/// A float of whole seconds as an integer (keys the parser reads as integers).
fn whole(v: Value) -> Value {
    match v {
        Value::Float(f) if f.fract() == 0.0 && (0.0..9.0e15).contains(&f) => Value::Integer(f as i64),
        other => other,
    }
}

/// Why the effective configuration could not be written as TOML.
#[derive(Debug, thiserror::Error)]
pub(super) enum RenderError {
    #[error(transparent)]
    Toml(#[from] toml::ser::Error),
    #[error("the configuration is not a table")]
    NotATable,
}

pub(super) fn to_toml(c: &Config) -> Result<String, RenderError> {
    let Value::Table(mut root) = Value::try_from(c)? else {
        return Err(RenderError::NotATable);
    };
    root.remove("source");
    if let Some(Value::String(level)) = root.get_mut("log_level") {
        *level = level.to_lowercase();
    }
    if let Some(a) = table(&mut root, "alpaca") {
        for key in ["request_timeout", "data_retry", "trading_retry", "order_retry", "start_retry"] {
            rename(a, key, &format!("{key}_secs"), |v| v);
        }
    }
    if let Some(b) = table(&mut root, "broker") {
        rename(b, "lost_after", "lost_after_secs", |v| v);
    }
    if let Some(r) = table(&mut root, "risk") {
        rename(r, "max_bar_age", "max_bar_age_secs", whole);
    }
    if let Some(env) = table(&mut root, "env") {
        env.remove("fixed_start");
        if let Some(Value::Table(mut exec)) = env.remove("exec") {
            rename(&mut exec, "trailing_stop", "trailing_stop_pct", |v| v);
            rename(&mut exec, "cash_cap_ignores_fees", "buy_cap", |v| {
                Value::String(if v.as_bool() == Some(true) { "before-fees" } else { "after-fees" }.into())
            });
            env.extend(exec);
        }
        // The action space and the reward, flat as the file writes them.
        if let Some(Value::Table(mut action)) = env.remove("action") {
            rename(&mut action, "kind", "action_space", |v| v);
            rename(&mut action, "band", "no_trade_band", |v| v);
            env.extend(action);
        }
        if let Some(Value::Table(mut reward)) = env.remove("reward") {
            rename(&mut reward, "kind", "reward", |v| v);
            rename(&mut reward, "eta", "sharpe_eta", |v| v);
            env.extend(reward);
        }
    }
    if let Some(train) = table(&mut root, "train")
        && let Some(Value::Table(rolling)) = train.remove("rolling")
    {
        train.extend(rolling);
    }
    if let Some(r) = table(&mut root, "retrain") {
        rename(r, "time_budget", "time_budget_secs", |v| v);
        if let Some(Value::Table(gate)) = r.remove("gate") {
            r.extend(gate);
        }
        r.insert("schedule".into(), Value::String(c.retrain.schedule.spec().to_string()));
        r.insert("timezone".into(), Value::String(c.retrain.schedule.zone().to_string()));
    }
    Ok(toml::to_string_pretty(&Value::Table(root))?)
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use std::path::Path;

    /// Every shipped config's effective TOML parses back to the same effective TOML.
    #[test]
    fn the_effective_configuration_parses_back_to_itself() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for f in ["config/tradebot.toml", "config/alpaca-paper.toml", "config/alpaca-live.toml.example"] {
            let text = std::fs::read_to_string(root.join(f)).unwrap();
            let c = Config::parse(Path::new(f), &text).unwrap();
            let once = c.to_toml();
            let again =
                Config::parse(Path::new("effective.toml"), &once).unwrap_or_else(|e| panic!("{f}: {e}\n{once}"));
            assert_eq!(again.to_toml(), once, "{f}");
            assert!(!once.contains("source") && once.contains("max_bar_age_secs") && once.contains("timezone"));
        }
    }
}
