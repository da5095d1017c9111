//! The replay's hooks into the one run loop (`engine::drive::Hooks`): what the daemon adds to a simulated
//! session. At each close the orders' fates go to `/metrics` and the account to the equity chart; each bar
//! is counted and timed; between bars the control socket is answered (a flatten's orders go back to the
//! loop), the dashboard fed, the watchdog pinged, a due retrain waited for in simulated time that stands
//! still, and the replay paced (`feed.speed`). A bar after the warm-up on which the engine stored no
//! decision is counted as missed.

use super::host::{Balance, EngineView, Host};
use super::retrainer::RunPipeline;
use crate::backtest::{SessionHooks, SimVenue};
use crate::domain::{Bar, OrderStatus};
use crate::engine::drive::{Flow, Hooks, Moment};
use crate::engine::{Command, DecisionRecord, Engine, ManualClock};
use crate::store::{Store, TreeName, TypedTree};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub(super) struct ReplayHooks<'h, P: RunPipeline> {
    host: &'h mut Host<P>,
    account: &'h Store,
    shutdown: &'h CancellationToken,
    clock: ManualClock,
    /// The first symbol's bars: the moments' times, for pacing.
    times: &'h [Bar],
    window_start: usize,
    warmup: usize,
    speed: f64,
    /// Buy-and-hold's curve and the bar it starts at.
    buy_hold: (&'h [f64], usize),
    decisions: TypedTree<DecisionRecord>,
    /// The last stored decision's key before the moment's bars.
    before: Option<Vec<u8>>,
    /// The moment whose bars are going through the engine.
    index: usize,
    /// Moments stepped (the window's and the warm-up's).
    pub(super) stepped: usize,
    /// Bars (after the feature warm-up) on which the engine stored no decision.
    pub(super) missed: usize,
}

impl<'h, P: RunPipeline> ReplayHooks<'h, P> {
    /// The hooks of a replay of `bars` (the window from `window_start`) on the account `account`.
    pub(super) fn new(
        host: &'h mut Host<P>,
        (account, shutdown): (&'h Store, &'h CancellationToken),
        clock: ManualClock,
        (bars, window_start): (&'h [Vec<Bar>], usize),
        buy_hold: (&'h [f64], usize),
    ) -> anyhow::Result<Self> {
        let (warmup, speed) = (host.config.features.warmup(), host.config.feed.speed);
        Ok(ReplayHooks {
            host,
            account,
            shutdown,
            clock,
            times: &bars[0],
            window_start,
            warmup,
            speed,
            buy_hold,
            decisions: account.tree::<DecisionRecord>(TreeName::Decisions)?,
            before: None,
            index: 0,
            stepped: 0,
            missed: 0,
        })
    }

    /// Bars before the window only warm the features up: not fed, charted or scheduled on.
    fn warming(&self, index: usize) -> bool {
        index < self.window_start
    }

    /// The last stored decision's key (O(log n); `len` would scan the tree).
    fn last_decision(&self) -> Option<Vec<u8>> {
        self.decisions.last().ok().flatten().map(|(k, _)| k.to_vec())
    }

    /// A bar after the warm-up that stored no decision, while the engine could trade, is a miss.
    fn count_missed(&mut self, core: &Engine, m: &Moment) {
        if m.index + 1 >= self.warmup
            && self.last_decision() == self.before
            && !core.is_paused()
            && core.risk().and_then(|r| r.kill_switch()).is_none()
        {
            self.missed += 1;
            // Without a model the engine said so once; each bar is not news.
            if core.missing_model().is_none() {
                log::warn!("replay: no decision stored for the bar at {}", m.t);
            }
        }
    }

    /// Waits while a retrain runs, answering the control socket and following its progress; the orders
    /// asked for meanwhile are returned. `Flow::Stop` when shutdown came first (the run's child is killed
    /// when the runtime drops its task).
    fn wait_for_retrain(&mut self, core: &mut Engine, funds: (f64, f64)) -> (Vec<Command>, Flow) {
        let mut cmds = Vec::new();
        loop {
            if self.shutdown.is_cancelled() {
                return (cmds, Flow::Stop);
            }
            let (more, idle) = poll(self.host, core, funds, &self.clock, self.account);
            cmds.extend(more);
            self.host.report.watchdog();
            if idle {
                return (cmds, Flow::Go);
            }
            sleep_unless_cancelled(self.shutdown, Duration::from_millis(50));
        }
    }
}

impl<'a, P: RunPipeline> Hooks<Engine, SimVenue<'a>> for ReplayHooks<'_, P> {
    fn on_close(&mut self, _core: &mut Engine, venue: &SimVenue<'a>, m: &Moment) {
        for st in &venue.statuses {
            self.host.report.order(if *st == OrderStatus::Filled { "filled" } else { "canceled" });
        }
        if m.index == self.window_start {
            self.host.report.ready(&format!("replaying from {}", m.t.date_naive()));
        }
        if !self.warming(m.index) {
            let (bh, from) = self.buy_hold;
            let buy_hold = bh.get(m.index.saturating_sub(from)).copied().unwrap_or(f64::NAN);
            self.host.equity_point(m.t, venue.sim.equity(), buy_hold);
        }
        self.before = self.last_decision();
        self.index = m.index;
    }

    fn on_bar(&mut self, _core: &mut Engine, bar: &Bar, orders: usize, took: Duration) {
        if !self.warming(self.index) {
            self.host.saw_bar(bar);
        }
        self.host.report.decided(took);
        self.host.report.sent_count(orders);
    }

    fn after_moment(&mut self, core: &mut Engine, venue: &SimVenue<'a>, m: &Moment) -> (Vec<Command>, Flow) {
        self.count_missed(core, m);
        self.stepped = m.index + 1;
        self.host.live.activity = format!("replaying {}", m.t.date_naive());
        let funds = (venue.sim.equity(), venue.sim.cash());
        let (mut cmds, _) = poll(self.host, core, funds, &self.clock, self.account);
        self.host.report.watchdog();
        if !self.warming(m.index) && self.host.retrainer.on_clock(&self.clock) {
            self.host.set_activity(format!("retraining at {} (simulated time stands still)", m.t.date_naive()));
            let (more, flow) = self.wait_for_retrain(core, funds);
            cmds.extend(more);
            if flow == Flow::Stop {
                return (cmds, Flow::Stop);
            }
        }
        let next = self.times.get(m.index + 1);
        if self.speed > 0.0
            && !self.warming(m.index)
            && let Some(next) = next
        {
            let gap = (next.t - m.t).to_std().unwrap_or_default().div_f64(self.speed);
            sleep_unless_cancelled(self.shutdown, gap.min(Duration::from_secs(3600)));
        }
        // Stopped before the next bar (a signal, the control socket); after the last one the replay is done.
        let stop = next.is_some() && self.shutdown.is_cancelled();
        (cmds, if stop { Flow::Stop } else { Flow::Go })
    }
}

impl<P: RunPipeline> SessionHooks<'_> for ReplayHooks<'_, P> {
    fn refused(&mut self, code: &'static str) {
        self.host.report.refused(code);
    }
}

/// Between bars: the host's control calls and retrain outcomes, then the dashboard. Returns the orders
/// asked for (a flatten's, for the simulated broker) and whether the retrainer is idle.
pub(super) fn poll<P: RunPipeline>(
    host: &mut Host<P>,
    core: &mut Engine,
    (equity, cash): (f64, f64),
    clock: &ManualClock,
    account: &Store,
) -> (Vec<Command>, bool) {
    let now = EngineView::of(core, Balance { equity, cash });
    let (cmds, idle) = host.poll(core, &now, clock);
    host.report.sent(&cmds);
    host.publish(&EngineView::of(core, Balance { equity, cash }), Some(account));
    (cmds, idle)
}

pub(super) fn sleep_unless_cancelled(token: &CancellationToken, d: Duration) {
    let end = Instant::now() + d;
    while !token.is_cancelled() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}
