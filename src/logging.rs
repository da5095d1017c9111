//! Logging through the `log` facade: to the systemd journal (with structured fields such as `SYMBOL`,
//! `ORDER_ID`, `MODEL_ID` from `log`'s key-values) when stderr is connected to the journal, otherwise a
//! readable stderr logger. The level comes from the config; `RUST_LOG`, when set, overrides it.

use log::LevelFilter;
use std::io::Write;

/// Installs the logger once. Later calls (tests, a second command in one process) are ignored.
pub fn init(level: LevelFilter) {
    let env = std::env::var("RUST_LOG").ok().filter(|s| !s.trim().is_empty());
    if systemd_journal_logger::connected_to_journal()
        && let Ok(journal) = systemd_journal_logger::JournalLog::new()
    {
        let journal = journal.with_syslog_identifier("tradebot".to_string());
        if journal.install().is_ok() {
            let lvl = env.as_deref().and_then(|s| s.parse().ok()).unwrap_or(level);
            log::set_max_level(lvl);
            return;
        }
    }
    let mut b = env_logger::Builder::new();
    b.filter_level(level);
    if let Some(spec) = env {
        b.parse_filters(&spec);
    }
    b.format(|buf, rec| {
        let ts = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
        write!(buf, "{ts} {:<5} {}: {}", rec.level(), rec.target(), rec.args())?;
        let mut kv = KvWriter(String::new());
        let _ = rec.key_values().visit(&mut kv);
        writeln!(buf, "{}", kv.0)
    });
    let _ = b.try_init();
}

struct KvWriter(String);

impl<'kvs> log::kv::VisitSource<'kvs> for KvWriter {
    fn visit_pair(&mut self, key: log::kv::Key<'kvs>, value: log::kv::Value<'kvs>) -> Result<(), log::kv::Error> {
        self.0.push_str(&format!(" {key}={value}"));
        Ok(())
    }
}
