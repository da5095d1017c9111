use super::*;
use chrono::TimeZone;
use chrono_tz::America::New_York;
use std::future::Future;

/// A feed that hands out its events, then waits forever (like a quiet stream).
struct Script(VecDeque<FeedEvent>);

impl MarketFeed for Script {
    fn next(&mut self) -> impl Future<Output = Result<FeedEvent, FeedError>> + Send {
        let ev = self.0.pop_front();
        async move {
            match ev {
                Some(ev) => Ok(ev),
                None => std::future::pending().await,
            }
        }
    }
}

fn sym(s: &str) -> Symbol {
    Symbol::new(s).unwrap()
}

/// A minute bar of `s` at `hh:mm` New York on 2024-05-01, closing at `p`, volume 10.
fn minute(s: &str, hh: u32, mm: u32, p: f64) -> Bar {
    let t = New_York.with_ymd_and_hms(2024, 5, 1, hh, mm, 0).unwrap().to_utc();
    Bar::new(sym(s), Timeframe::MIN1, t, p, p + 1.0, p * 0.5, p, 10.0).unwrap()
}

fn at(hh: u32, mm: u32) -> DateTime<Utc> {
    New_York.with_ymd_and_hms(2024, 5, 1, hh, mm, 0).unwrap().to_utc()
}

/// Everything `path` hands out before it would wait (100 ms without an event). The tests run on paused
/// time, so those 100 ms pass at once, and only once nothing else is ready.
async fn drain<F: MarketFeed + Send>(path: &mut LiveBars<F>) -> Vec<FeedEvent> {
    let mut out = Vec::new();
    while let Ok(ev) = tokio::time::timeout(std::time::Duration::from_millis(100), path.next()).await {
        out.push(ev.unwrap());
    }
    out
}

fn bars(evs: &[FeedEvent]) -> Vec<Bar> {
    evs.iter().filter_map(|e| if let FeedEvent::Bar(b) = e { Some(b.clone()) } else { None }).collect()
}

const M15: Timeframe = Timeframe::Minutes(15);

#[tokio::test(start_paused = true)]
async fn minutes_are_stored_and_the_engine_sees_only_closed_bars_of_the_timeframe() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let syms = [sym("AAPL"), sym("MSFT")];
    let mut evs: VecDeque<FeedEvent> = VecDeque::from([FeedEvent::Connected { backfilled: 0 }]);
    for i in 0..45 {
        for s in ["AAPL", "MSFT"] {
            evs.push_back(FeedEvent::Bar(minute(s, 9 + (30 + i) / 60, (30 + i) % 60, 100.0 + f64::from(i))));
        }
    }
    let (path, resume) = LiveBars::resume(store.clone(), &syms, M15, at(10, 20)).unwrap();
    let mut path = path.over(Script(evs));
    assert!(resume.last_minute.is_empty(), "nothing stored yet");
    assert_eq!(resume.backfill_from, at(10, 20) - MAX_BACKFILL);
    let out = drain(&mut path).await;
    let seen = bars(&out);
    assert_eq!(seen.len(), 6, "three 15Min bars per symbol, no minute bar: {seen:?}");
    assert!(seen.iter().all(|b| b.timeframe == M15));
    let aapl: Vec<&Bar> = seen.iter().filter(|b| b.symbol == syms[0]).collect();
    assert_eq!(aapl.iter().map(|b| b.t).collect::<Vec<_>>(), [at(9, 30), at(9, 45), at(10, 0)]);
    assert_eq!((aapl[0].o, aapl[0].c, aapl[0].v), (100.0, 114.0, 150.0));
    for s in &syms {
        assert_eq!(store.bar_count(s, Timeframe::MIN1).unwrap(), 45, "every minute stored once");
        assert_eq!(store.bar_count(s, M15).unwrap(), 3, "every closed bar stored once");
    }
}

#[tokio::test(start_paused = true)]
async fn a_restart_mid_bucket_rebuilds_it_and_resumes_after_the_last_stored_minute() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let syms = [sym("AAPL")];
    // Before the stop: 09:30-09:44 closed and stored, then 09:45-09:52 stored.
    let first: Vec<Bar> = (30..53).map(|mm| minute("AAPL", 9, mm, f64::from(mm))).collect();
    store.put_bars(&first).unwrap();
    let mut a = Aggregator::new(M15).unwrap();
    let closed: Vec<Bar> = first.iter().flat_map(|b| a.push(b).unwrap()).collect();
    assert_eq!(closed.len(), 1);
    store.put_bars(&closed).unwrap();

    // The backfill brings 09:53-09:59; the 09:30 bucket is not emitted again.
    let evs: VecDeque<FeedEvent> = (53..60)
        .map(|mm| FeedEvent::Bar(minute("AAPL", 9, mm, f64::from(mm))))
        .chain([FeedEvent::Connected { backfilled: 7 }])
        .collect();
    let (path, resume) = LiveBars::resume(store.clone(), &syms, M15, at(10, 5)).unwrap();
    let mut path = path.over(Script(evs));
    assert_eq!(resume.last_minute.get(&syms[0]), Some(&at(9, 52)), "the backfill starts after it");
    let seen = bars(&drain(&mut path).await);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let b = &seen[0];
    assert_eq!((b.t, b.o, b.c, b.v), (at(9, 45), 45.0, 59.0, 150.0), "all fifteen minutes, the stored ones too");
    assert_eq!(store.bar_count(&syms[0], M15).unwrap(), 2);
    assert_eq!(store.bar_count(&syms[0], Timeframe::MIN1).unwrap(), 30);

    // A store last written long ago resumes MAX_BACKFILL back, not from its last bar.
    let (_, late) = LiveBars::resume(store.clone(), &syms, M15, at(10, 5) + Duration::days(30)).unwrap();
    assert!(late.last_minute.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_quiet_bucket_closes_by_the_clock_when_live_but_never_during_a_backfill() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let syms = [sym("AAPL")];
    // Backfilling (no Connected yet): the 09:30 bucket's end is long past, but more minutes may follow.
    let evs: VecDeque<FeedEvent> = (30..40).map(|mm| FeedEvent::Bar(minute("AAPL", 9, mm, 1.0))).collect();
    let (path, _) = LiveBars::resume(store.clone(), &syms, M15, at(9, 30)).unwrap();
    let mut path = path.over(Script(evs));
    assert!(bars(&drain(&mut path).await).is_empty(), "not closed while backfilling");
    path.inner.0.push_back(FeedEvent::Connected { backfilled: 10 });
    let out = drain(&mut path).await;
    let seen = bars(&out);
    assert_eq!(seen.len(), 1, "closed by the clock once live: {out:?}");
    assert_eq!((seen[0].t, seen[0].v), (at(9, 30), 100.0));
    assert_eq!(store.bar_count(&syms[0], M15).unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn one_minute_bars_pass_through_and_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let evs = VecDeque::from([FeedEvent::Bar(minute("AAPL", 9, 30, 1.0)), FeedEvent::Bar(minute("AAPL", 9, 31, 2.0))]);
    let (path, _) = LiveBars::resume(store.clone(), &[sym("AAPL")], Timeframe::MIN1, at(9, 32)).unwrap();
    let mut path = path.over(Script(evs));
    assert_eq!(bars(&drain(&mut path).await).len(), 2);
    assert_eq!(store.bar_count(&sym("AAPL"), Timeframe::MIN1).unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_symbol_without_a_bar_in_a_period_the_others_traded_in_gets_no_bar_once_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let syms = [sym("AAPL"), sym("QUIET")];
    // QUIET trades in the first bucket only; AAPL in both.
    let mut evs: VecDeque<FeedEvent> = VecDeque::from([FeedEvent::Connected { backfilled: 0 }]);
    for mm in 30..60 {
        evs.push_back(FeedEvent::Bar(minute("AAPL", 9, mm, 10.0)));
        if mm < 45 {
            evs.push_back(FeedEvent::Bar(minute("QUIET", 9, mm, 20.0)));
        }
    }
    let (path, _) = LiveBars::resume(store.clone(), &syms, M15, at(10, 0)).unwrap();
    let mut path = path.over(Script(evs));
    let out = drain(&mut path).await;
    let missing: Vec<(Symbol, DateTime<Utc>)> = out
        .iter()
        .filter_map(|e| if let FeedEvent::NoBar { symbol, t } = e { Some((symbol.clone(), *t)) } else { None })
        .collect();
    assert_eq!(missing, [(syms[1].clone(), at(9, 45))], "{out:?}");
    let at_945: Vec<Symbol> = bars(&out).into_iter().filter(|b| b.t == at(9, 45)).map(|b| b.symbol).collect();
    assert_eq!(at_945, [syms[0].clone()], "AAPL's 09:45 bar is delivered");
    let no_bar_at = out.iter().position(|e| matches!(e, FeedEvent::NoBar { .. })).unwrap();
    let aapl_945 = out.iter().position(|e| matches!(e, FeedEvent::Bar(b) if b.t == at(9, 45))).unwrap();
    assert!(aapl_945 < no_bar_at, "the notice follows the period's bars");
}

#[tokio::test(start_paused = true)]
async fn a_period_stored_without_its_minutes_is_not_emitted_again_by_the_backfill() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let syms = [sym("AAPL")];
    // The 09:30 bar was fetched as a 15Min bar (no minutes stored): the engine warmed up on it.
    let fetched = Bar::new(syms[0].clone(), M15, at(9, 30), 1.0, 2.0, 0.5, 1.5, 100.0).unwrap();
    store.put_bars(&[fetched]).unwrap();
    let evs: VecDeque<FeedEvent> = (30..50).map(|mm| FeedEvent::Bar(minute("AAPL", 9, mm, 1.0))).collect();
    let (path, resume) = LiveBars::resume(store.clone(), &syms, M15, at(10, 0)).unwrap();
    assert!(resume.last_minute.is_empty());
    let seen = bars(&drain(&mut path.over(Script(evs))).await);
    assert!(seen.iter().all(|b| b.t != at(9, 30)), "the stored period came again: {seen:?}");
    assert_eq!(store.bar_count(&syms[0], Timeframe::MIN1).unwrap(), 20, "its minutes are still stored");
}
