//! Whether a worker may trust its check character.
//!
//! The check character rejects 61 of 62 random probes without a lookup, but only under the
//! sidecar's code secret, length and check setting: with another secret, valid codes fail it
//! and would answer 404. The sidecar publishes its scheme's fingerprint in the projection
//! marker's value (`<unix ms> <fingerprint>`), which every lookup reads already (`MGET sl:c:<code>
//! sl:meta:projection`): knowing it costs nothing. Each worker keeps the last state it saw and
//! rejects on the check character only while the marker names its own scheme.

/// The fingerprint this module's configuration expects in the marker.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    fingerprint: String,
    /// Without `shortlink_code_secret_file` (check character off) the secret is never used:
    /// only the version, length and check parts have to agree.
    secret_known: bool,
}

impl Expected {
    pub fn new(fingerprint: &str, secret_known: bool) -> Self {
        Self {
            fingerprint: fingerprint.to_owned(),
            secret_known,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.fingerprint
    }

    fn matches(&self, found: &[u8]) -> bool {
        let ours = self.fingerprint.as_bytes();
        if self.secret_known {
            return found == ours;
        }
        let parameters = ours
            .iter()
            .rposition(|&b| b == b'-')
            .map_or(ours, |at| &ours[..=at]);
        found.starts_with(parameters)
    }
}

/// What the last marker this worker read said about its scheme.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SchemeState {
    /// No marker read yet, or one without a fingerprint (a sidecar from before fingerprints).
    #[default]
    Unknown,
    Matching,
    /// The marker names another scheme: the check character says nothing.
    Mismatching,
}

/// The state a marker's value puts a worker in.
pub fn state_of(marker: &[u8], expected: &Expected) -> SchemeState {
    match marker_fingerprint(marker) {
        None => SchemeState::Unknown,
        Some(found) if expected.matches(found) => SchemeState::Matching,
        Some(_) => SchemeState::Mismatching,
    }
}

/// The fingerprint in a marker's value, if it carries one.
pub fn marker_fingerprint(value: &[u8]) -> Option<&[u8]> {
    let at = value.iter().position(|&b| b == b' ')?;
    let found = value[at + 1..].trim_ascii();
    (!found.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = "v1-L6-c1-0123456789abcdef";

    #[test]
    fn the_marker_decides_the_state() {
        let expected = Expected::new(OURS, true);
        let marker = |fp: &str| format!("1700000000000 {fp}").into_bytes();
        assert_eq!(state_of(&marker(OURS), &expected), SchemeState::Matching);
        assert_eq!(
            state_of(&marker("v1-L6-c1-fedcba9876543210"), &expected),
            SchemeState::Mismatching
        );
        assert_eq!(
            state_of(&marker("v1-L7-c1-0123456789abcdef"), &expected),
            SchemeState::Mismatching
        );
        // Older sidecars and hand-set markers carry no fingerprint.
        assert_eq!(state_of(b"1700000000000", &expected), SchemeState::Unknown);
        assert_eq!(state_of(b"bench", &expected), SchemeState::Unknown);
        assert_eq!(state_of(b"17 ", &expected), SchemeState::Unknown);
    }

    #[test]
    fn without_a_secret_only_the_parameters_count() {
        let expected = Expected::new("v1-L6-c0-aaaaaaaaaaaaaaaa", false);
        let marker = |fp: &str| format!("1 {fp}").into_bytes();
        assert_eq!(
            state_of(&marker("v1-L6-c0-0123456789abcdef"), &expected),
            SchemeState::Matching
        );
        assert_eq!(
            state_of(&marker("v1-L6-c1-0123456789abcdef"), &expected),
            SchemeState::Mismatching
        );
    }
}
