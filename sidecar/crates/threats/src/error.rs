//! The crate's one error type: why a feed could not be loaded or refreshed (the last good copy
//! keeps answering meanwhile).

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("fetching the feed failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the feed's server answered {0}")]
    Status(u16),
    #[error("reading the feed's file failed: {0}")]
    File(#[from] std::io::Error),
    #[error("the feed is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the feed has no entry ({errors} lines could not be read)")]
    Empty { errors: u64 },
    #[error(
        "the feed shrank from {before} to {after} entries (more than half): held back, the \
         previous copy still answers"
    )]
    Shrank { before: usize, after: usize },
    #[error("bad --threat-feeds {spec:?}: {why}")]
    Spec { spec: String, why: String },
    #[error("parsing the feed panicked")]
    Panicked,
    #[error("the reputation service failed: {0}")]
    Reputation(String),
}
