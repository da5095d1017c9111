//! The one run loop's synchronous parts: the core's command handling (shared by the live runner's core
//! thread and the simulated sessions) and the loop over market moments that replays, backtests and the
//! promotion gate step.
//!
//! ```text
//!  moments (bars aligned by time) ─► for each moment t:
//!     clock.set(t)
//!     venue.close(t) ─► the broker's answer as events (fills, then its snapshot) ─► handle ─► core
//!     each bar of t ─► handle(core, Event::Bar) ─► commands ─► venue (orders wait for the next close)
//!     hooks.after_moment ─► the owner's commands (a flatten from the control socket) ─► dispatch
//! ```
//!
//! Live, the same `handle` runs on the core thread with the command task's queue as its sink; the async
//! edges (feed, updates, ticks, the broker calls) are all the live runner adds.

use crate::domain::Bar;
use crate::engine::{Command, Core, Event, ManualClock};
use chrono::{DateTime, Utc};
use std::time::{Duration, Instant};

/// Why a sink did not take a command; the command comes back.
pub(crate) enum Refused {
    /// It will never take another (the command task has stopped: shutting down).
    Closed(Command),
    /// No room now; `wait` takes it when there is.
    Full(Command),
}

/// Where the core's commands go: the live command task's queue, or a simulated broker.
pub(crate) trait CommandSink {
    /// Takes `c` now, or hands it back.
    fn offer(&mut self, c: Command) -> Result<(), Refused>;
    /// Waits for room for `c`; hands it back when the sink will never take it.
    fn wait(&mut self, c: Command) -> Result<(), Command>;
    /// Its capacity, for the log line of a full queue.
    fn capacity(&self) -> usize {
        0
    }
}

/// `ev` through the core, and its commands to `sink`; an order the sink will never take goes back to the
/// core as `Event::NotSent` (recorded so at once), and so on until the core has nothing more to say.
/// Returns how many orders the sink took.
pub(crate) fn handle<C: Core, S: CommandSink>(core: &mut C, ev: Event, sink: &mut S) -> usize {
    let out = core.process(ev);
    dispatch(core, out, sink)
}

/// `out` (the core's commands) to `sink`, as `handle` does. Returns how many orders the sink took.
pub(crate) fn dispatch<C: Core, S: CommandSink>(core: &mut C, mut out: Vec<Command>, sink: &mut S) -> usize {
    let mut sent = 0;
    while !out.is_empty() {
        let mut more = Vec::new();
        for c in out {
            let submit = matches!(c, Command::Submit(_));
            match sink.offer(c) {
                Ok(()) => sent += usize::from(submit),
                // The command task has stopped (shutdown): an order that will not be sent is recorded so.
                Err(Refused::Closed(Command::Submit(o))) => {
                    log::info!("runner: order {} not sent: shutting down", o.client_order_id);
                    more.extend(core.process(Event::NotSent { client_order_id: o.client_order_id.clone() }));
                }
                Err(Refused::Closed(_)) => log::debug!("runner: command dropped, the command task has stopped"),
                Err(Refused::Full(c)) => match wait_for_room(sink, c) {
                    Ok(()) => sent += usize::from(submit),
                    Err(Some(id)) => more.extend(core.process(Event::NotSent { client_order_id: id })),
                    Err(None) => {}
                },
            }
        }
        out = more;
    }
    sent
}

/// The broker is slower than the orders (its rate limit, or no answer within the timeout): the core waits
/// for room rather than dropping anything, so orders go out at the pace the broker takes them (each is
/// checked for staleness at its turn). Err: the command was dropped, with the id of an order among it.
fn wait_for_room<S: CommandSink>(sink: &mut S, c: Command) -> Result<(), Option<crate::domain::ClientOrderId>> {
    let id = if let Command::Submit(o) = &c { Some(o.client_order_id.clone()) } else { None };
    if let Some(id) = &id {
        log::warn!(
            "runner: the command queue is full ({} waiting for the broker); order {id} waits for room",
            sink.capacity()
        );
    }
    sink.wait(c).map_err(|_| {
        log::debug!("runner: command dropped, the command task has stopped");
        id
    })
}

/// One moment of a simulated run: the bars of every symbol stamped `t` (aligned), the `index`-th.
#[derive(Debug, Clone)]
pub(crate) struct Moment {
    pub index: usize,
    pub t: DateTime<Utc>,
    pub bars: Vec<Bar>,
}

/// A simulated broker for the loop: it takes the core's commands, and at each moment's close fills what
/// it holds and answers with events (the trade updates, then its snapshot as a reconciliation).
pub(crate) trait Venue: CommandSink {
    type Error;
    fn close(&mut self, moment: &Moment) -> Result<Vec<Event>, Self::Error>;
}

/// Whether the loop goes on after a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    Stop,
}

/// What the owner of a loop sees of it, and its turn between moments. Every method does nothing by
/// default.
pub(crate) trait Hooks<C, V> {
    /// The venue's answer at `moment`'s close reached the core (the bars have not yet).
    fn on_close(&mut self, _core: &mut C, _venue: &V, _moment: &Moment) {}
    /// `bar` went through the core in `took`; the venue took `orders` orders from it.
    fn on_bar(&mut self, _core: &mut C, _bar: &Bar, _orders: usize, _took: Duration) {}
    /// Every bar of `moment` is in: the owner's turn (control calls, status, retrains, pacing). Its
    /// commands (a flatten's orders) go to the venue as the core's own do.
    fn after_moment(&mut self, _core: &mut C, _venue: &V, _moment: &Moment) -> (Vec<Command>, Flow) {
        (Vec::new(), Flow::Go)
    }
}

/// No hooks.
impl<C, V> Hooks<C, V> for () {}

/// The one loop: every moment through the core with `venue` as its broker and `clock` at the moment's
/// time. Returns `Flow::Stop` when the hooks stopped it before the last moment.
pub(crate) fn run<C, V, H, I>(
    core: &mut C,
    clock: &ManualClock,
    venue: &mut V,
    moments: I,
    hooks: &mut H,
) -> Result<Flow, V::Error>
where
    C: Core,
    V: Venue,
    H: Hooks<C, V>,
    I: IntoIterator<Item = Result<Moment, V::Error>>,
{
    for moment in moments {
        let moment = moment?;
        clock.set(moment.t);
        for ev in venue.close(&moment)? {
            handle(core, ev, venue);
        }
        hooks.on_close(core, venue, &moment);
        for bar in &moment.bars {
            let started = Instant::now();
            let orders = handle(core, Event::Bar(bar.clone()), venue);
            hooks.on_bar(core, bar, orders, started.elapsed());
        }
        let (cmds, flow) = hooks.after_moment(core, venue, &moment);
        dispatch(core, cmds, venue);
        if flow == Flow::Stop {
            return Ok(Flow::Stop);
        }
    }
    Ok(Flow::Go)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Control, EngineClock};

    /// A core that writes down what it hears, with the clock's time.
    struct Log(ManualClock, Vec<String>);

    impl Core for Log {
        fn process(&mut self, ev: Event) -> Vec<Command> {
            let what = match ev {
                Event::Bar(b) => format!("bar {}", b.symbol),
                Event::Reconciled(_) => "reconciled".into(),
                Event::Control(_) => "control".into(),
                _ => "other".into(),
            };
            self.1.push(format!("{} {what}", self.0.now().timestamp()));
            Vec::new()
        }
    }

    struct Answering;

    impl CommandSink for Answering {
        fn offer(&mut self, _: Command) -> Result<(), Refused> {
            Ok(())
        }
        fn wait(&mut self, _: Command) -> Result<(), Command> {
            Ok(())
        }
    }

    impl Venue for Answering {
        type Error = ();
        fn close(&mut self, _: &Moment) -> Result<Vec<Event>, ()> {
            Ok(vec![Event::Reconciled(Box::default())])
        }
    }

    /// Stops after moment 1; the owner's turn sends a control after each moment.
    struct StopAfterOne;

    impl Hooks<Log, Answering> for StopAfterOne {
        fn after_moment(&mut self, core: &mut Log, _: &Answering, m: &Moment) -> (Vec<Command>, Flow) {
            core.process(Event::Control(Control::Pause));
            (Vec::new(), if m.index == 1 { Flow::Stop } else { Flow::Go })
        }
    }

    fn moment(index: usize, secs: i64) -> Result<Moment, ()> {
        let t = DateTime::from_timestamp(secs, 0).unwrap();
        let bar = |s: &str| Bar {
            symbol: crate::domain::Symbol::new(s).unwrap(),
            timeframe: crate::domain::Timeframe::DAY1,
            t,
            o: 1.0,
            h: 1.0,
            l: 1.0,
            c: 1.0,
            v: 1.0,
        };
        Ok(Moment { index, t, bars: vec![bar("AAPL"), bar("MSFT")] })
    }

    #[test]
    fn each_moment_moves_the_clock_then_the_broker_answers_then_the_bars_then_the_owner_and_a_stop_ends_it() {
        let clock = ManualClock::new(DateTime::from_timestamp(0, 0).unwrap());
        let mut core = Log(clock.clone(), Vec::new());
        let moments = vec![moment(0, 100), moment(1, 200), moment(2, 300)];
        let flow = run(&mut core, &clock, &mut Answering, moments, &mut StopAfterOne).unwrap();
        assert_eq!(flow, Flow::Stop);
        let want = [
            "100 reconciled",
            "100 bar AAPL",
            "100 bar MSFT",
            "100 control",
            "200 reconciled",
            "200 bar AAPL",
            "200 bar MSFT",
            "200 control",
        ];
        assert_eq!(core.1, want, "moment 2 is never stepped");
    }
}
