//! Model versions: the manifest (`manifest`), the registry of versions on disk (`registry`), and seeding
//! it from the shipped default models (`seed`).

pub mod manifest;
pub mod registry;
pub mod seed;

pub use manifest::{Algorithm, FeatureRef, Manifest, MismatchError, ModelKind, ModelState, TensorSpec};
pub use registry::{Registry, RegistryError};
pub use seed::{Misfit, SeedReport};

#[cfg(test)]
mod tests;
