//! The daemon around the engine: systemd notifications (`notify`). The replay and live drivers, the
//! retrain scheduler and the control loop build on it.

pub mod notify;
