//! Model versions: the manifest (`manifest`) and the registry of versions on disk (`registry`).

pub mod manifest;
pub mod registry;

pub use manifest::{FeatureRef, Manifest, MismatchError, ModelKind, ModelState, TensorSpec};
pub use registry::{Registry, RegistryError};

#[cfg(test)]
mod tests;
