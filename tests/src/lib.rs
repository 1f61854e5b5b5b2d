//! Test and demo harnesses.
