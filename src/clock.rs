//! The process's clock: the wall clock, or a simulated one shared by `tradebot fake-alpaca --speed` and
//! the daemon it serves, so that a week of a market can be paper traded offline in minutes.
//!
//! A simulated clock is three numbers: the simulated time at a wall-clock instant and a speed (simulated
//! minutes per wall second). Two processes given the same three agree on the time whenever they start,
//! which is what lets the fake's stream, its REST history and `/v2/clock` line up with the daemon's bar
//! closes, backfills and retrain schedule. It is passed as `TRADEBOT_SIM_CLOCK=<sim RFC 3339>@<wall unix
//! seconds>x<minutes per second>` (the fake prints the line) and installed once at start; every other
//! part of the crate reads [`now`]. Timers and timeouts of the network stay on the wall clock.

use chrono::{DateTime, Duration, Utc};
use std::sync::OnceLock;

/// The environment variable that carries a simulated clock.
pub const ENV: &str = "TRADEBOT_SIM_CLOCK";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockError {
    #[error(
        "{ENV}={0:?} is not a simulated clock: expected <simulated RFC 3339 time>@<wall unix seconds>x<minutes per \
         second>, e.g. 2026-11-02T14:30:00Z@1764000000x60, as `tradebot fake-alpaca` prints it"
    )]
    Malformed(String),
    #[error("{ENV}: the speed {0} is not a positive number of simulated minutes per second")]
    Speed(f64),
    #[error("a different simulated clock is already installed in this process")]
    AlreadySet,
}

/// Simulated time running `speed` minutes per wall second from `sim` at the wall instant `wall`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimClock {
    /// The simulated time at `wall`.
    pub sim: DateTime<Utc>,
    /// The wall-clock instant at which the simulated time was `sim`.
    pub wall: DateTime<Utc>,
    /// Simulated minutes per wall second (positive and finite).
    pub speed: f64,
}

impl SimClock {
    /// A clock showing `sim` now and running at `speed` minutes per second.
    pub fn starting(sim: DateTime<Utc>, speed: f64) -> Result<SimClock, ClockError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(ClockError::Speed(speed));
        }
        // Whole seconds and milliseconds, so that the printed form parses back to the same clock.
        let sim = DateTime::from_timestamp(sim.timestamp(), 0).unwrap_or(sim);
        let wall = DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap_or_else(Utc::now);
        Ok(SimClock { sim, wall, speed })
    }

    /// A clock from its printed form (`<simulated RFC 3339 time>@<wall unix seconds>x<speed>`, what
    /// `Display` writes), as `$TRADEBOT_SIM_CLOCK` carries it to a child process; a malformed text is
    /// `ClockError::Malformed`.
    pub fn parse(text: &str) -> Result<SimClock, ClockError> {
        let bad = || ClockError::Malformed(text.into());
        let (sim, rest) = text.trim().split_once('@').ok_or_else(bad)?;
        let (wall, speed) = rest.split_once('x').ok_or_else(bad)?;
        let sim = DateTime::parse_from_rfc3339(sim).map_err(|_| bad())?.to_utc();
        let wall: f64 = wall.parse().map_err(|_| bad())?;
        let wall = DateTime::from_timestamp_millis((wall * 1000.0).round() as i64).ok_or_else(bad)?;
        let speed: f64 = speed.parse().map_err(|_| bad())?;
        if !(speed.is_finite() && speed > 0.0) {
            return Err(ClockError::Speed(speed));
        }
        Ok(SimClock { sim, wall, speed })
    }

    /// The simulated time at the wall instant `wall_now`.
    pub fn at(&self, wall_now: DateTime<Utc>) -> DateTime<Utc> {
        let ms = (wall_now - self.wall).num_milliseconds() as f64 * self.speed * 60.0;
        self.sim + Duration::milliseconds(ms as i64)
    }

    /// The wall time a simulated span takes.
    pub fn wall_span(&self, sim: Duration) -> std::time::Duration {
        let ms = sim.num_milliseconds().max(0) as f64 / (self.speed * 60.0);
        std::time::Duration::from_micros((ms * 1000.0) as u64)
    }
}

impl std::fmt::Display for SimClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wall = self.wall.timestamp_millis() as f64 / 1000.0;
        write!(f, "{}@{wall:.3}x{}", self.sim.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), self.speed)
    }
}

static SIM: OnceLock<SimClock> = OnceLock::new();

/// Makes `clock` this process's clock (once; installing the same clock again is harmless).
pub(crate) fn install(clock: SimClock) -> Result<(), ClockError> {
    let set = SIM.get_or_init(|| clock);
    if *set == clock { Ok(()) } else { Err(ClockError::AlreadySet) }
}

/// Reads [`ENV`]: `Ok(None)` when unset or empty.
pub(crate) fn from_env() -> Result<Option<SimClock>, ClockError> {
    match std::env::var(ENV) {
        Ok(v) if !v.trim().is_empty() => SimClock::parse(&v).map(Some),
        _ => Ok(None),
    }
}

/// The simulated clock in force, if any.
pub(crate) fn simulated() -> Option<SimClock> {
    SIM.get().copied()
}

/// Now: simulated when a simulated clock is installed, the wall clock otherwise.
pub(crate) fn now() -> DateTime<Utc> {
    match SIM.get() {
        Some(c) => c.at(Utc::now()),
        None => Utc::now(),
    }
}

/// The span of this process's clock that `wall` covers (itself on the wall clock).
pub(crate) fn sim_span(wall: std::time::Duration) -> Duration {
    let d = Duration::from_std(wall).unwrap_or(Duration::MAX);
    match SIM.get() {
        Some(c) => Duration::milliseconds((d.num_milliseconds() as f64 * c.speed * 60.0) as i64),
        None => d,
    }
}

/// How long to sleep on the wall clock for `sim` to pass on this process's clock.
pub(crate) fn wall_span(sim: Duration) -> std::time::Duration {
    match SIM.get() {
        Some(c) => c.wall_span(sim),
        None => sim.to_std().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn a_printed_clock_parses_back_to_itself_and_runs_at_its_speed() {
        let c = SimClock::starting(t("2026-11-02T14:30:00.250Z"), 60.0).unwrap();
        assert_eq!(c.sim, t("2026-11-02T14:30:00Z"), "whole seconds, as printed");
        let back = SimClock::parse(&c.to_string()).unwrap();
        assert_eq!(back, c);
        // One wall second is one simulated hour at 60 minutes per second.
        assert_eq!(c.at(c.wall + Duration::seconds(1)), t("2026-11-02T15:30:00Z"));
        assert_eq!(c.at(c.wall + Duration::milliseconds(500)), t("2026-11-02T15:00:00Z"));
        assert_eq!(c.wall_span(Duration::minutes(90)), std::time::Duration::from_millis(1500));
        assert_eq!(c.wall_span(Duration::minutes(-5)), std::time::Duration::ZERO);
        // With no simulated clock installed (the unit tests install none) a span is itself.
        assert_eq!(sim_span(std::time::Duration::from_secs(2)), Duration::seconds(2));
        assert_eq!(wall_span(Duration::seconds(3)), std::time::Duration::from_secs(3));
    }

    #[test]
    fn a_bad_clock_is_named_with_its_expected_form() {
        for bad in ["", "2026-11-02T14:30:00Z", "2026-11-02@1x1", "2026-11-02T14:30:00Z@abcx60", "x@1x2"] {
            let e = SimClock::parse(bad).unwrap_err().to_string();
            assert!(e.contains(ENV) && e.contains("fake-alpaca"), "{bad}: {e}");
        }
        for speed in ["0", "-3", "NaN", "inf"] {
            let e = SimClock::parse(&format!("2026-11-02T14:30:00Z@1764000000x{speed}")).unwrap_err();
            assert!(matches!(e, ClockError::Speed(_)), "{speed}: {e}");
        }
        assert!(matches!(SimClock::starting(Utc::now(), 0.0), Err(ClockError::Speed(_))));
    }
}
