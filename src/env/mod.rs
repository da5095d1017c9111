//! The vectorized trading environment (placeholder while being built).
