//! Model versions: the manifest (`manifest`), the registry of versions on disk (`registry`), a policy's
//! training state kept beside it (`state`), and seeding it from the shipped default models (`seed`).

pub mod manifest;
pub mod registry;
pub mod seed;
pub mod state;

pub use manifest::{Algorithm, FeatureRef, Manifest, MismatchError, ModelKind, ModelState, TensorSpec};
pub use registry::{Registry, RegistryError};
pub use seed::{Misfit, SeedReport};
pub use state::{STATE_FILE, StateError, StateRef};

#[cfg(test)]
mod tests;
