//! The statuses a live link redirects with: the one list the record, the rules, the SQL rows
//! and the API's checks and schema read. A leaf, so that the record and the rules both use it.

/// The statuses a live link redirects with.
pub const REDIRECT_STATUSES: [u16; 4] = [301, 302, 307, 308];

/// Whether `status` is one of [`REDIRECT_STATUSES`].
pub fn is_redirect_status(status: u64) -> bool {
    REDIRECT_STATUSES
        .iter()
        .any(|&redirect| u64::from(redirect) == status)
}
