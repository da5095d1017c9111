//! Logging through the `log` facade: to the systemd journal (with structured fields from `log`'s
//! key-values: `SYMBOL` and `ORDER_ID` on each order sent or not accepted, `MODEL_ID` on a promotion, a
//! rollback and a retrain's outcome) when stderr is connected to the journal, otherwise a
//! readable stderr logger. The level comes from the config; `RUST_LOG`, when set, overrides it. The last
//! `RECENT_MAX` lines at WARN and above are also kept in memory (`recent`) for the dashboard.

use log::{LevelFilter, Log};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;

/// Lines at WARN and above kept for the dashboard.
pub(crate) const RECENT_MAX: usize = 200;

/// One log line as the dashboard shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LogLine {
    pub at: chrono::DateTime<chrono::Utc>,
    pub level: String,
    pub target: String,
    pub message: String,
}

/// The last `max` lines at WARN and above, oldest first.
#[derive(Debug)]
pub(crate) struct Recent {
    lines: Mutex<VecDeque<LogLine>>,
    max: usize,
}

impl Recent {
    pub(crate) const fn new(max: usize) -> Recent {
        Recent { lines: Mutex::new(VecDeque::new()), max }
    }

    /// Keeps `rec` when it is a warning or an error.
    pub(crate) fn push(&self, rec: &log::Record) {
        if rec.level() > log::Level::Warn {
            return;
        }
        let line = LogLine {
            at: chrono::Utc::now(),
            level: rec.level().to_string(),
            target: rec.target().to_string(),
            message: rec.args().to_string(),
        };
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == self.max {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(crate) fn lines(&self) -> Vec<LogLine> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }
}

static RECENT: Recent = Recent::new(RECENT_MAX);

/// The process's last lines at WARN and above, oldest first.
pub(crate) fn recent() -> Vec<LogLine> {
    RECENT.lines()
}

/// The installed logger, keeping warnings and errors in `RECENT` too.
struct Tee<L: Log>(L);

impl<L: Log> Log for Tee<L> {
    fn enabled(&self, m: &log::Metadata) -> bool {
        self.0.enabled(m)
    }

    fn log(&self, rec: &log::Record) {
        #[cfg(test)]
        capture::push(rec);
        if self.0.enabled(rec.metadata()) {
            RECENT.push(rec);
            bridge::write(|| self.0.log(rec));
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Installs the logger once. Later calls (tests, a second command in one process) are ignored.
pub(crate) fn init(level: LevelFilter) {
    let env = std::env::var("RUST_LOG").ok().filter(|s| !s.trim().is_empty());
    if systemd_journal_logger::connected_to_journal()
        && let Ok(journal) = systemd_journal_logger::JournalLog::new()
    {
        let journal = journal.with_syslog_identifier("tradebot".to_string());
        if log::set_boxed_logger(Box::new(Tee(journal))).is_ok() {
            let lvl = env.as_deref().and_then(|s| s.parse().ok()).unwrap_or(level);
            log::set_max_level(lvl);
        }
        return;
    }
    let logger = stderr_logger(level, env.as_deref());
    let max = logger.filter();
    if log::set_boxed_logger(Box::new(Tee(logger))).is_ok() {
        log::set_max_level(max);
    }
}

/// The stderr logger: `level`, or `RUST_LOG`'s spec (`env`) when set, in env_logger's syntax; a `/text`
/// after it keeps the lines that contain `text` (plain text, not a regular expression).
fn stderr_logger(level: LevelFilter, env: Option<&str>) -> env_logger::Logger {
    let mut b = env_logger::Builder::new();
    b.filter_level(level);
    if let Some(spec) = env {
        b.parse_filters(spec);
    }
    b.format(|buf, rec| {
        let ts = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
        write!(buf, "{ts} {:<5} {}: {}", rec.level(), rec.target(), rec.args())?;
        let mut kv = KvWriter(String::new());
        let _ = rec.key_values().visit(&mut kv);
        writeln!(buf, "{}", kv.0)
    });
    b.build()
}

/// Log lines beside a progress bar: while a bar is shown (`bridge::show`), each line is written with the
/// bar cleared and drawn again below it (indicatif's `suspend`), so no line lands on the bar's line.
pub(crate) mod bridge {
    #[cfg(feature = "train")]
    use std::sync::Mutex;

    #[cfg(feature = "train")]
    static BAR: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

    /// Log lines go around `bar` until `hide` (or another `show`).
    #[cfg(feature = "train")]
    pub(crate) fn show(bar: &indicatif::ProgressBar) {
        *BAR.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
    }

    /// Log lines are written as they come again.
    #[cfg(feature = "train")]
    pub(crate) fn hide() {
        *BAR.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Whether a bar is shown.
    #[cfg(all(test, feature = "train"))]
    pub(crate) fn showing() -> bool {
        BAR.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Runs `write` (a log line's output) with the shown bar, if any, cleared around it.
    pub(super) fn write(write: impl FnOnce()) {
        #[cfg(feature = "train")]
        {
            let bar = BAR.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(bar) = bar {
                bar.suspend(write);
                return;
            }
        }
        write();
    }
}

/// Test support: `message` at INFO through the installed logger's wrapper (`Tee`) around `inner`.
#[cfg(test)]
pub(crate) fn log_through_tee(inner: &dyn Log, message: &str) {
    struct Borrowed<'a>(&'a dyn Log);
    impl Log for Borrowed<'_> {
        fn enabled(&self, m: &log::Metadata) -> bool {
            self.0.enabled(m)
        }
        fn log(&self, rec: &log::Record) {
            self.0.log(rec)
        }
        fn flush(&self) {
            self.0.flush()
        }
    }
    Tee(Borrowed(inner)).log(
        &log::Record::builder().level(log::Level::Info).target("tradebot::x").args(format_args!("{message}")).build(),
    );
}

/// Test support: the log lines of a thread, or of any thread when they contain a given text, captured
/// while a `Watch` lives (the logger installed at the first watch if none is).
#[cfg(test)]
pub(crate) mod capture {
    use std::sync::Mutex;
    use std::thread::ThreadId;

    struct Watcher {
        id: u64,
        thread: Option<ThreadId>,
        needle: Option<String>,
        lines: Vec<(log::Level, String)>,
    }

    static WATCHERS: Mutex<Vec<Watcher>> = Mutex::new(Vec::new());
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// Captures while it lives.
    pub(crate) struct Watch(u64);

    struct Silent;
    impl log::Log for Silent {
        fn enabled(&self, _: &log::Metadata) -> bool {
            false
        }
        fn log(&self, _: &log::Record) {}
        fn flush(&self) {}
    }

    fn start(thread: Option<ThreadId>, needle: Option<String>) -> Watch {
        let _ = log::set_boxed_logger(Box::new(super::Tee(Silent)));
        log::set_max_level(log::LevelFilter::Trace);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        WATCHERS.lock().unwrap_or_else(|p| p.into_inner()).push(Watcher { id, thread, needle, lines: Vec::new() });
        Watch(id)
    }

    /// The lines logged on this thread.
    pub(crate) fn this_thread() -> Watch {
        start(Some(std::thread::current().id()), None)
    }

    /// The lines, on any thread, that contain `needle`.
    pub(crate) fn containing(needle: &str) -> Watch {
        start(None, Some(needle.to_string()))
    }

    impl Watch {
        /// The lines captured so far: level and message.
        pub(crate) fn lines(&self) -> Vec<(log::Level, String)> {
            let w = WATCHERS.lock().unwrap_or_else(|p| p.into_inner());
            w.iter().find(|w| w.id == self.0).map(|w| w.lines.clone()).unwrap_or_default()
        }
    }

    impl Drop for Watch {
        fn drop(&mut self) {
            WATCHERS.lock().unwrap_or_else(|p| p.into_inner()).retain(|w| w.id != self.0);
        }
    }

    pub(super) fn push(rec: &log::Record) {
        let mut watchers = WATCHERS.lock().unwrap_or_else(|p| p.into_inner());
        if watchers.is_empty() {
            return;
        }
        let (me, text) = (std::thread::current().id(), rec.args().to_string());
        for w in watchers.iter_mut() {
            if w.thread.is_some_and(|t| t == me) || w.needle.as_deref().is_some_and(|n| text.contains(n)) {
                w.lines.push((rec.level(), text.clone()));
            }
        }
    }
}

struct KvWriter(String);

impl<'kvs> log::kv::VisitSource<'kvs> for KvWriter {
    fn visit_pair(&mut self, key: log::kv::Key<'kvs>, value: log::kv::Value<'kvs>) -> Result<(), log::kv::Error> {
        self.0.push_str(&format!(" {key}={value}"));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(level: log::Level, msg: &str, f: impl FnOnce(&log::Record)) {
        f(&log::Record::builder().level(level).target("tradebot::x").args(format_args!("{msg}")).build());
    }

    #[test]
    fn only_warnings_and_errors_are_kept_the_last_max_of_them() {
        let r = Recent::new(3);
        record(log::Level::Info, "info", |rec| r.push(rec));
        record(log::Level::Debug, "debug", |rec| r.push(rec));
        assert!(r.lines().is_empty());
        for i in 0..5 {
            let level = if i % 2 == 0 { log::Level::Warn } else { log::Level::Error };
            record(level, &format!("line {i}"), |rec| r.push(rec));
        }
        let kept: Vec<(String, String)> = r.lines().into_iter().map(|l| (l.level, l.message)).collect();
        let want = [("WARN", "line 2"), ("ERROR", "line 3"), ("WARN", "line 4")];
        assert_eq!(kept, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert_eq!(r.lines()[0].target, "tradebot::x");
    }

    #[test]
    fn rust_log_sets_levels_by_module_and_its_text_filter_is_plain_text() {
        let kept = |logger: &env_logger::Logger, level, target: &str, msg: &str| {
            logger.matches(&log::Record::builder().level(level).target(target).args(format_args!("{msg}")).build())
        };
        let by_config = stderr_logger(LevelFilter::Info, None);
        assert!(kept(&by_config, log::Level::Info, "tradebot::daemon", "a bar"));
        assert!(!kept(&by_config, log::Level::Debug, "tradebot::daemon", "a bar"));

        let by_env = stderr_logger(LevelFilter::Info, Some("warn,tradebot::daemon=debug/order a.c"));
        assert!(kept(&by_env, log::Level::Debug, "tradebot::daemon", "order a.c sent"));
        assert!(!kept(&by_env, log::Level::Info, "tradebot::store", "order a.c sent"), "other modules at WARN");
        assert!(!kept(&by_env, log::Level::Debug, "tradebot::daemon", "a bar"), "without the text");
        // `.` is a character to find, not any character: the text is not a regular expression.
        assert!(!kept(&by_env, log::Level::Warn, "tradebot::daemon", "order abc sent"));
    }
}
