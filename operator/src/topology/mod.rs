//! Topology engine: observe → plan (pure) → execute.
