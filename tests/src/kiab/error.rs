//! Errors of the kube-in-a-box controllers and harness.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum KiabError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("I/O on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("image: {0}")]
    Image(String),
    #[error("pod spec: {0}")]
    Spec(String),
    #[error("no free pod address left in 127.0.0.0/8 from the configured base")]
    AddressesExhausted,
    #[error("{0}")]
    Other(String),
}

impl KiabError {
    /// Wraps an I/O error with the path it concerns, so messages say which file failed.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

pub type Result<T, E = KiabError> = std::result::Result<T, E>;
