//! Retraining: the pieces the daemon's weekend run is made of. `child`: the training process (the same
//! binary, `tradebot train ...`) with its time and GPU-memory budgets; `gate`: the promotion decision from
//! candidate and champion backtests on the holdout (`noise`: how likely a lead is to be luck); `pipeline`: one run end to end (snapshot, child,
//! evaluation, gate, promotion), with `spec` (what a run is given), `dataset` (the store's backup and the training snapshot) and `launch`
//! (the child's command line and environment); `record`: every run's outcome in the store's `runs` tree;
//! `study_record`: every search's study (its trials) in the store's `studies` tree.

pub mod child;
mod dataset;
pub mod gate;
pub mod holdout;
mod launch;
pub mod memory;
pub mod noise;
pub mod pipeline;
pub mod record;
mod spec;
pub mod study_record;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

pub use pipeline::{EvalError, Evaluator, PipelineSpec, RetrainPipeline, RetrainProgress, Trigger};
pub use record::{CandidateRecord, NOT_ENOUGH_DATA, RunOutcome, RunRecord, WarmStart};
