//! systemd notifications (`sd_notify`): `READY=1` once the first reconciliation is done, `STATUS=` lines
//! saying what the daemon is doing, `WATCHDOG=1` from the engine loop (so a stuck engine misses its
//! deadline and systemd restarts it), `STOPPING=1` at shutdown. Outside systemd (no `NOTIFY_SOCKET`) every
//! call is a no-op. A failed send is logged once, never fatal: trading does not stop for a lost datagram.

use sd_notify::NotifyState;
use std::time::{Duration, Instant};

pub(crate) struct Notifier {
    enabled: bool,
    /// Half of `WatchdogSec`: pings come at least this often while the engine loop turns.
    ping_every: Option<Duration>,
    last_ping: Option<Instant>,
    warned: bool,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` (checked against `WATCHDOG_PID`) from the environment.
    pub(crate) fn from_env() -> Notifier {
        let enabled = std::env::var_os("NOTIFY_SOCKET").is_some();
        let ping_every = sd_notify::watchdog_enabled().map(|d| d / 2);
        Notifier { enabled, ping_every, last_ping: None, warned: false }
    }

    /// A notifier that sends nothing (tests, `backtest`).
    #[cfg(test)]
    pub(crate) fn disabled() -> Notifier {
        Notifier { enabled: false, ping_every: None, last_ping: None, warned: false }
    }

    /// Ready: said once in the log too (whether or not systemd listens).
    pub(crate) fn ready(&mut self, status: &str) {
        log::info!("tradebot run: ready: {status}");
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    pub(crate) fn status(&mut self, status: &str) {
        self.send(&[NotifyState::Status(status)]);
    }

    pub(crate) fn stopping(&mut self, status: &str) {
        self.send(&[NotifyState::Stopping, NotifyState::Status(status)]);
    }

    /// Called from the engine loop at every turn; sends `WATCHDOG=1` when half the interval has passed.
    pub(crate) fn watchdog(&mut self) {
        let Some(every) = self.ping_every else { return };
        let now = Instant::now();
        if self.last_ping.is_none_or(|t| now.duration_since(t) >= every) {
            self.last_ping = Some(now);
            self.send(&[NotifyState::Watchdog]);
        }
    }

    fn send(&mut self, states: &[NotifyState]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(states)
            && !self.warned
        {
            self.warned = true;
            log::warn!("sd_notify failed (further failures not logged): {e}");
        }
    }
}
