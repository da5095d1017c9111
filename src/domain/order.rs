//! The order lifecycle: one `OrderStatus` enum and one transition table (`OrderStatus::apply`).
//!
//! ```text
//!  Created ──submit──► PendingNew ──accepted──► Accepted ──fill(part)──► PartiallyFilled ──fill──► Filled
//!     │                   │  ▲                     │                          │
//!     │                   │  └─(fills may overtake the acknowledgement)      │
//!     └─rejected          ├─rejected──► Rejected   └──cancel_requested──► PendingCancel ──canceled──► Canceled
//!                         └─expired───► Expired                               └─cancel_rejected─► (back)
//! ```
//! `Created` is an intent stored before anything is sent; `PendingNew` and `PendingCancel` are the
//! in-flight states ("sent, not acknowledged"). Terminal states accept only a repeat of the event that
//! ended them (duplicate stream messages after a reconnect), which leaves them unchanged.

use serde::{Deserialize, Serialize};

/// Where one of our orders stands, as the OMS tracks it; `apply` is the only way it changes. Alpaca's many
/// statuses (`new`, `done_for_day`, `held`, ...) are mapped onto these by `alpaca::parse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Decided and stored, not yet sent: the intent a restart finds and resends under the same id.
    Created,
    /// Sent to the broker, no acknowledgement yet (in flight).
    PendingNew,
    /// Acknowledged and working at the broker (Alpaca's `new` or `accepted`), nothing filled yet.
    Accepted,
    /// Part of the quantity filled; the rest still working.
    PartiallyFilled,
    /// We asked the broker to cancel; its answer has not come yet (in flight).
    PendingCancel,
    /// The whole quantity filled (terminal).
    Filled,
    /// Canceled at the broker, by us or by it; any partial fills stand (terminal).
    Canceled,
    /// Refused, by our own checks before sending or by the broker (terminal).
    Rejected,
    /// Its time in force ran out unfilled or part-filled (terminal).
    Expired,
    /// Replaced at the broker by another order, which carries on under a new id (terminal).
    Replaced,
}

/// What can happen to an order: our own requests and the broker's reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderEvent {
    /// We sent the order to the broker.
    Submit,
    /// The broker acknowledged it (Alpaca's `new`, `accepted` or `pending_new` update).
    Accepted,
    /// The broker reported a fill that leaves part of the quantity open.
    PartialFill,
    /// The broker reported the fill that completes the quantity.
    Fill,
    /// We asked the broker to cancel the order.
    CancelRequested,
    /// The broker refused our cancel; `partially_filled` says which working state the order returns to.
    CancelRejected {
        /// True when some of the order had filled, so it returns to `PartiallyFilled` rather than `Accepted`.
        partially_filled: bool,
    },
    /// The broker canceled the order (on our request, or its own, e.g. at the end of the day).
    Canceled,
    /// The order was refused: by the broker, or by our checks before it was sent.
    Rejected,
    /// The broker expired the order at the end of its time in force.
    Expired,
    /// The broker replaced the order with another one.
    Replaced,
}

/// An event the transition table has no arrow for in the order's state (e.g. a fill for an order never
/// sent); the order keeps its state and the OMS logs the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("order in state {from:?} cannot take event {event:?}")]
pub struct TransitionError {
    /// The state the order was in, and stays in.
    pub from: OrderStatus,
    /// The event that was refused.
    pub event: OrderEvent,
}

impl std::fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OrderStatus::Created => "created",
            OrderStatus::PendingNew => "pending_new",
            OrderStatus::Accepted => "accepted",
            OrderStatus::PartiallyFilled => "partially_filled",
            OrderStatus::PendingCancel => "pending_cancel",
            OrderStatus::Filled => "filled",
            OrderStatus::Canceled => "canceled",
            OrderStatus::Rejected => "rejected",
            OrderStatus::Expired => "expired",
            OrderStatus::Replaced => "replaced",
        })
    }
}

impl OrderStatus {
    /// Finished for good (filled, canceled, rejected, expired or replaced): no later event changes it.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            OrderStatus::Filled
                | OrderStatus::Canceled
                | OrderStatus::Rejected
                | OrderStatus::Expired
                | OrderStatus::Replaced
        )
    }

    /// Sent to the broker and not yet acknowledged in its new state.
    pub fn is_in_flight(self) -> bool {
        matches!(self, OrderStatus::PendingNew | OrderStatus::PendingCancel)
    }

    /// Open at the broker (or possibly so): counts against buying power and must be reconciled.
    pub fn is_open(self) -> bool {
        !self.is_terminal() && self != OrderStatus::Created
    }

    /// The transition table. Anything not listed is an error and leaves the order as it was.
    pub fn apply(self, event: OrderEvent) -> Result<OrderStatus, TransitionError> {
        use OrderEvent as E;
        use OrderStatus as S;
        let next = match (self, event) {
            (S::Created, E::Submit) => S::PendingNew,
            (S::Created, E::Rejected) => S::Rejected, // refused locally or by the broker before any ack
            (S::PendingNew, E::Accepted) => S::Accepted,
            (S::PendingNew | S::Accepted | S::PartiallyFilled | S::PendingCancel, E::PartialFill) => S::PartiallyFilled,
            (S::PendingNew | S::Accepted | S::PartiallyFilled | S::PendingCancel, E::Fill) => S::Filled,
            (S::Accepted | S::PartiallyFilled, E::Accepted) => self, // duplicate or late ack
            (S::PendingNew | S::Accepted | S::PartiallyFilled, E::CancelRequested) => S::PendingCancel,
            (S::PendingCancel, E::CancelRequested) => S::PendingCancel,
            (S::PendingCancel, E::CancelRejected { partially_filled }) => {
                if partially_filled {
                    S::PartiallyFilled
                } else {
                    S::Accepted
                }
            }
            (S::PendingNew | S::Accepted | S::PartiallyFilled | S::PendingCancel, E::Canceled) => S::Canceled,
            (S::PendingNew | S::PendingCancel, E::Rejected) => S::Rejected,
            (S::PendingNew | S::Accepted | S::PartiallyFilled | S::PendingCancel, E::Expired) => S::Expired,
            (S::Accepted | S::PartiallyFilled | S::PendingCancel, E::Replaced) => S::Replaced,
            // Idempotent repeats of the event that ended an order.
            (S::Filled, E::Fill)
            | (S::Canceled, E::Canceled)
            | (S::Rejected, E::Rejected)
            | (S::Expired, E::Expired)
            | (S::Replaced, E::Replaced) => self,
            (from, event) => return Err(TransitionError { from, event }),
        };
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn event() -> impl Strategy<Value = OrderEvent> {
        prop_oneof![
            Just(OrderEvent::Submit),
            Just(OrderEvent::Accepted),
            Just(OrderEvent::PartialFill),
            Just(OrderEvent::Fill),
            Just(OrderEvent::CancelRequested),
            any::<bool>().prop_map(|p| OrderEvent::CancelRejected { partially_filled: p }),
            Just(OrderEvent::Canceled),
            Just(OrderEvent::Rejected),
            Just(OrderEvent::Expired),
            Just(OrderEvent::Replaced),
        ]
    }

    #[test]
    fn happy_paths() {
        let s = OrderStatus::Created.apply(OrderEvent::Submit).unwrap();
        assert!(s.is_in_flight());
        let s = s.apply(OrderEvent::Accepted).unwrap().apply(OrderEvent::PartialFill).unwrap();
        assert_eq!(s, OrderStatus::PartiallyFilled);
        let s = s.apply(OrderEvent::CancelRequested).unwrap();
        assert_eq!(
            s.apply(OrderEvent::CancelRejected { partially_filled: true }).unwrap(),
            OrderStatus::PartiallyFilled
        );
        assert_eq!(s.apply(OrderEvent::Fill).unwrap(), OrderStatus::Filled, "a fill may overtake a cancel");
        assert!(OrderStatus::Filled.apply(OrderEvent::Canceled).is_err());
        assert!(OrderStatus::Created.apply(OrderEvent::Fill).is_err(), "nothing fills before it is sent");
    }

    proptest! {
        /// Whatever the broker sends in whatever order, the table never reaches an illegal state:
        /// a terminal order never changes again, nothing fills before it was submitted, `Created` is
        /// never re-entered, and a rejected event leaves the state as it was.
        #[test]
        fn no_sequence_reaches_an_illegal_state(events in proptest::collection::vec(event(), 0..40)) {
            let mut state = OrderStatus::Created;
            let mut submitted = false;
            for ev in events {
                let before = state;
                match state.apply(ev) {
                    Ok(next) => {
                        if before.is_terminal() {
                            prop_assert_eq!(next, before, "terminal state changed");
                        }
                        if ev == OrderEvent::Submit {
                            submitted = true;
                        }
                        if matches!(next, OrderStatus::Filled | OrderStatus::PartiallyFilled | OrderStatus::Accepted) {
                            prop_assert!(submitted, "{:?} before submit", next);
                        }
                        prop_assert!(next != OrderStatus::Created || before == OrderStatus::Created);
                        prop_assert!(!(before == OrderStatus::Filled && next != OrderStatus::Filled));
                        state = next;
                    }
                    Err(e) => {
                        prop_assert_eq!(e.from, before);
                        prop_assert_eq!(state, before);
                    }
                }
            }
        }
    }
}
