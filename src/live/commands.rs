//! The command task: carries out the core's commands against the broker, one at a time, each with a
//! timeout, and reports the outcome back as an event. It starts with a reconciliation of its own.

use super::RunnerConfig;
use crate::broker::{Broker, BrokerError};
use crate::domain::{BrokerOrder, OrderUpdate, UpdateKind};
use crate::domain::{ClientOrderId, OrderRequest, OrderStatus};
use crate::engine::{Command, Event};
use crate::risk::RiskApproved;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Runs until shutdown; a command in hand is finished (its own timeout bounds it) and its answer
/// reported; queued submits are not sent but reported back as `Event::NotSent`, so the OMS records them
/// as never sent at once.
pub(super) async fn execute<B: Broker>(
    mut broker: B,
    mut commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
    cfg: RunnerConfig,
    stop: CancellationToken,
) {
    let mut next = Some(Command::Reconcile);
    loop {
        let cmd = match next.take() {
            Some(c) => c,
            None => tokio::select! {
                biased;
                _ = stop.cancelled() => return not_sent(commands, &events).await,
                c = commands.recv() => match c { Some(c) => c, None => return },
            },
        };
        let out = match cmd {
            Command::Submit(o) => Some(submit(&mut broker, o, &cfg, &events).await),
            Command::Cancel(id) => {
                cancel(&mut broker, &id, &cfg).await;
                None
            }
            Command::Reconcile => reconcile(&mut broker, &cfg, &stop).await,
        };
        if let Some(ev) = out
            && events.send(ev).await.is_err()
        {
            return;
        }
    }
}

/// At shutdown: the submits still queued go back to the core as `Event::NotSent`; the channel is closed
/// so the core hears of any later one itself (`core_loop`).
async fn not_sent(mut commands: mpsc::Receiver<Command>, events: &mpsc::Sender<Event>) {
    commands.close();
    while let Ok(c) = commands.try_recv() {
        if let Command::Submit(o) = c {
            log::info!("runner: order {} not sent: shutting down", o.client_order_id);
            if events.send(Event::NotSent { client_order_id: o.client_order_id.clone() }).await.is_err() {
                return;
            }
        }
    }
}

async fn submit<B: Broker>(
    broker: &mut B,
    o: RiskApproved<OrderRequest>,
    cfg: &RunnerConfig,
    events: &mpsc::Sender<Event>,
) -> Event {
    let id = o.client_order_id.clone();
    let symbol = o.symbol.to_string();
    let protective = o.why.is_protective();
    // The audit trail: one line per order sent, and its outcome.
    let line = format!(
        "{} {} {} market {} (client id {id}, why: {}; priced at {})",
        o.side,
        o.qty,
        o.symbol,
        o.tif.as_str(),
        o.why,
        crate::domain::money(o.ref_price)
    );
    // Its bar's age again, now that its turn has come (it may have waited behind a slow broker).
    let closed = o.bar_time + chrono::Duration::from_std(cfg.bar_length).unwrap_or_default();
    let age = crate::clock::now() - closed;
    // A protective sell (stop, kill switch, flatten) is never held back as stale.
    if !protective && age > chrono::Duration::from_std(cfg.max_order_age).unwrap_or(chrono::Duration::MAX) {
        let reason = format!(
            "stale at send: its bar closed {} s ago, more than the {} s allowed (risk.max_bar_age_secs)",
            age.num_seconds(),
            cfg.max_order_age.as_secs()
        );
        log::warn!("runner: order {id} not sent: {reason}");
        return Event::SubmitFailed { client_order_id: id, reason, retriable: false };
    }
    // Reported before the POST leaves: the core records the attempt, and a snapshot taken after it (this
    // task takes them, in order) may then find the order lost only a grace period after this moment.
    if events.send(Event::Sending { client_order_id: id.clone() }).await.is_err() {
        return Event::NotSent { client_order_id: id };
    }
    match tokio::time::timeout(cfg.broker_timeout, broker.submit(o)).await {
        Ok(Ok(order)) => {
            // The journal's SYMBOL and ORDER_ID fields (`logging`).
            log::info!(symbol = symbol.as_str(), order_id = id.to_string().as_str(); "order sent: {line}: accepted as {} ({})", order.id, order.status);
            Event::Order(Box::new(answer_as_update(order)))
        }
        Ok(Err(e)) => {
            log::warn!(symbol = symbol.as_str(), order_id = id.to_string().as_str(); "order not accepted: {line}: {e}");
            Event::SubmitFailed { client_order_id: id, reason: e.to_string(), retriable: e.retriable() }
        }
        Err(_) => failed(id, &BrokerError::Ambiguous(format!("no answer within {:?}", cfg.broker_timeout))),
    }
}

fn failed(client_order_id: ClientOrderId, e: &BrokerError) -> Event {
    log::warn!("runner: submit of {client_order_id} failed: {e}");
    Event::SubmitFailed { client_order_id, reason: e.to_string(), retriable: e.retriable() }
}

/// The broker's answer to a submit, as the update the stream would send for it (the OMS takes each
/// fill once, however often it hears of it).
pub(super) fn answer_as_update(order: BrokerOrder) -> OrderUpdate {
    let kind = match order.status {
        OrderStatus::Filled => UpdateKind::Fill,
        OrderStatus::PartiallyFilled => UpdateKind::PartialFill,
        OrderStatus::Rejected => UpdateKind::Rejected,
        OrderStatus::Canceled => UpdateKind::Canceled,
        OrderStatus::Expired => UpdateKind::Expired,
        OrderStatus::PendingNew => UpdateKind::PendingNew,
        _ => UpdateKind::New,
    };
    OrderUpdate { kind, order, time: None, fill: None }
}

async fn cancel<B: Broker>(broker: &mut B, id: &ClientOrderId, cfg: &RunnerConfig) {
    match tokio::time::timeout(cfg.broker_timeout, broker.cancel(id)).await {
        Ok(Ok(())) => log::info!("runner: cancel of {id} sent"),
        Ok(Err(e)) => log::warn!("runner: cancel of {id} failed: {e}"),
        Err(_) => log::warn!("runner: cancel of {id}: no answer within {:?}", cfg.broker_timeout),
    }
}

/// A snapshot, retried until it works or shutdown begins (the core trades nothing meanwhile).
async fn reconcile<B: Broker>(broker: &mut B, cfg: &RunnerConfig, stop: &CancellationToken) -> Option<Event> {
    loop {
        let err = match tokio::time::timeout(cfg.broker_timeout, broker.snapshot()).await {
            Ok(Ok(snap)) => return Some(Event::Reconciled(Box::new(snap))),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {:?}", cfg.broker_timeout),
        };
        log::warn!("runner: broker snapshot failed ({err}); retrying in {:?}", cfg.reconcile_retry);
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(cfg.reconcile_retry) => {}
        }
    }
}
