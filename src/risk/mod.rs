//! Risk: the checks every order passes before any broker sees it. Approval is a type: a broker only takes
//! a `RiskApproved<OrderRequest>`, and only this module can build one (the field is private and the
//! constructor is visible to `risk` alone).

mod notional;

pub use notional::{NotionalRefusal, approve_notional};

/// A value the risk checks let through. Built only inside `crate::risk`.
#[derive(Debug, Clone, PartialEq)]
pub struct RiskApproved<T>(T);

impl<T> RiskApproved<T> {
    /// Only the risk module approves.
    #[allow(dead_code)] // the checks that call it land with the engine
    pub(in crate::risk) fn new(inner: T) -> Self {
        RiskApproved(inner)
    }

    pub fn get(&self) -> &T {
        &self.0
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for RiskApproved<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// For unit tests elsewhere in the crate (the OMS, brokers) that need an approved order without running
/// the checks. Not compiled into the binary.
#[cfg(test)]
#[allow(dead_code)]
pub(crate) fn approve_for_test<T>(inner: T) -> RiskApproved<T> {
    RiskApproved::new(inner)
}
