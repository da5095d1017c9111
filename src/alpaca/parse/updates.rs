//! trade_updates messages (`{"stream":..,"data":..}`, text or binary) into `UpdatesItem`s.

use super::{Frame, ParseError, decimal, field_err, opt_time};
use crate::alpaca::event::{Fill, OrderUpdate, UpdateKind, UpdatesItem};
use crate::alpaca::wire::updates::{self as w, TradeEvent};
use serde::Deserialize;

/// Parses one trade_updates frame: normally one JSON object; an array of them is accepted too.
pub fn updates_frame(payload: &[u8]) -> Frame<UpdatesItem> {
    let mut frame = Frame::default();
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(serde_json::Value::Array(msgs)) => msgs.into_iter().for_each(|m| frame.push(updates_message(m))),
        Ok(obj @ serde_json::Value::Object(_)) => frame.push(updates_message(obj)),
        Ok(other) => frame.push(Err(field_err("frame", &other.to_string(), "is neither an object nor an array"))),
        Err(e) => frame.push(Err(ParseError::Json(e))),
    }
    frame
}

/// One message. `Ok(None)`: an unknown stream or event, skipped.
pub fn updates_message(v: serde_json::Value) -> Result<Option<UpdatesItem>, ParseError> {
    let status = v.pointer("/data/order/status").and_then(|s| s.as_str()).map(String::from);
    Ok(Some(match w::UpdatesMsg::deserialize(v)? {
        w::UpdatesMsg::Authorization(a) if a.status == "authorized" => UpdatesItem::Authorized,
        w::UpdatesMsg::Authorization(a) => UpdatesItem::Unauthorized { action: a.action },
        w::UpdatesMsg::Listening(l) => UpdatesItem::Listening(l.streams),
        w::UpdatesMsg::TradeUpdate(u) => match trade_update(*u, status.as_deref())? {
            Some(u) => UpdatesItem::Update(Box::new(u)),
            None => return Ok(None),
        },
        w::UpdatesMsg::Unknown => return Ok(None),
    }))
}

fn trade_update(u: w::TradeUpdate, status: Option<&str>) -> Result<Option<OrderUpdate>, ParseError> {
    let Some(kind) = kind(u.event) else { return Ok(None) };
    let fill = match (&u.price, &u.qty) {
        (Some(p), Some(q)) if matches!(kind, UpdateKind::Fill | UpdateKind::PartialFill) => Some(Fill {
            price: decimal("price", p)?,
            qty: decimal("qty", q)?,
            position_qty: u
                .position_qty
                .as_deref()
                .map(|s| decimal("position_qty", s))
                .transpose()?
                .unwrap_or_default(),
            execution_id: u.execution_id.clone(),
        }),
        _ if matches!(kind, UpdateKind::Fill | UpdateKind::PartialFill) => {
            return Err(field_err("price", "", "a fill must carry price and qty"));
        }
        _ => None,
    };
    Ok(Some(OrderUpdate {
        kind,
        order: super::rest::order_with_status_text(u.order, status)?,
        time: opt_time("timestamp", &u.timestamp)?,
        fill,
    }))
}

fn kind(e: TradeEvent) -> Option<UpdateKind> {
    use UpdateKind as K;
    Some(match e {
        TradeEvent::New => K::New,
        TradeEvent::Fill => K::Fill,
        TradeEvent::PartialFill => K::PartialFill,
        TradeEvent::Canceled => K::Canceled,
        TradeEvent::Expired => K::Expired,
        TradeEvent::DoneForDay => K::DoneForDay,
        TradeEvent::Replaced => K::Replaced,
        TradeEvent::Accepted => K::Accepted,
        TradeEvent::Rejected => K::Rejected,
        TradeEvent::PendingNew => K::PendingNew,
        TradeEvent::Stopped => K::Stopped,
        TradeEvent::PendingCancel => K::PendingCancel,
        TradeEvent::PendingReplace => K::PendingReplace,
        TradeEvent::Calculated => K::Calculated,
        TradeEvent::Suspended => K::Suspended,
        TradeEvent::OrderReplaceRejected => K::OrderReplaceRejected,
        TradeEvent::OrderCancelRejected => K::OrderCancelRejected,
        TradeEvent::Restated => K::Restated,
        TradeEvent::Unknown => return None,
    })
}
