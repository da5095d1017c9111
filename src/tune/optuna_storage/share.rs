//! The storage's share of a worker's trials, logged when the worker ends (`make bench-cluster` prints it).

use super::client::waited_here;
use std::time::{Duration, Instant};

/// The storage's share of this worker's trials: their wall time (from reading the study before the trial
/// to its end in the storage) and the part of it spent waiting on storage calls (the heartbeat's thread apart).
#[derive(Default)]
pub(super) struct StorageShare {
    trials: usize,
    wall: Duration,
    storage: Duration,
    calls: u64,
}

impl StorageShare {
    pub(super) fn add(&mut self, number: i64, started: Instant, (waited, calls): (Duration, u64)) {
        let (wall, (now, now_calls)) = (started.elapsed(), waited_here());
        let (storage, calls) = (now.saturating_sub(waited), now_calls - calls);
        log::debug!("trial {number}: {:.2}s, {:.0} ms of it in {calls} storage calls", wall.as_secs_f64(), ms(storage));
        self.trials += 1;
        self.wall += wall;
        self.storage += storage;
        self.calls += calls;
    }

    pub(super) fn log(&self, study: &str) {
        if self.trials == 0 {
            return;
        }
        let wall = self.wall.as_secs_f64();
        log::info!(
            "study {study}: this worker's {} trials took {wall:.1}s, {:.2}s of it waiting on the storage ({:.1}% of a trial's wall time; {} calls, {:.1} ms a call)",
            self.trials,
            self.storage.as_secs_f64(),
            100.0 * self.storage.as_secs_f64() / wall.max(1e-9),
            self.calls,
            ms(self.storage) / self.calls.max(1) as f64
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
