//! Messaging's one error type: what the API answers 422 with, the database, or the operator's.

use shortlink_store::StorageError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workspace's gateway cannot send as it is set (the API answers 422 with `code`).
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Randomness or a TLS client could not be had: the operator's to see, in the log.
    #[error("{0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }

    /// What a person may read of it (an internal error's cause is the log's).
    pub fn message(&self) -> String {
        match self {
            Error::Invalid { message, .. } => message.clone(),
            Error::Storage(_) => "database unavailable".into(),
            Error::Internal(_) => "internal error".into(),
        }
    }
}
