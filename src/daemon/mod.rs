//! The daemon around the engine: systemd notifications (`notify`), the status as the state directory
//! tells it (`status`), scheduled retraining in the background (`retrainer`). The replay and live drivers, the retrain scheduler and the control loop build on it.

pub mod host;
pub mod notify;
pub mod replay;
pub mod retrainer;
pub mod status;
