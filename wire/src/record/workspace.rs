//! The name of the workspace a link belongs to, as records carry it and nginx's
//! `$shortlink_workspace` gives it: `[a-z0-9][a-z0-9-]{0,31}`. Held inline, so a reader copies
//! and compares it without an allocation.

use std::fmt;

/// A workspace's name: `[a-z0-9][a-z0-9-]{0,31}`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkspaceName {
    len: u8,
    bytes: [u8; WorkspaceName::MAX_LEN],
}

impl WorkspaceName {
    pub const MAX_LEN: usize = 32;

    /// The workspace every installation has. Records of its links do not name it, so they keep
    /// the bytes they had before workspaces existed.
    pub const DEFAULT: WorkspaceName = {
        let name = b"default";
        let mut bytes = [0; WorkspaceName::MAX_LEN];
        let mut i = 0;
        while i < name.len() {
            bytes[i] = name[i];
            i += 1;
        }
        WorkspaceName {
            len: name.len() as u8,
            bytes,
        }
    };

    /// `bytes` if they are a workspace name.
    pub fn parse(bytes: &[u8]) -> Option<WorkspaceName> {
        let (first, rest) = bytes.split_first()?;
        let fits = bytes.len() <= Self::MAX_LEN;
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        if !fits || !alnum(first) || !rest.iter().all(|b| alnum(b) || *b == b'-') {
            return None;
        }
        let mut name = WorkspaceName {
            len: bytes.len() as u8,
            bytes: [0; Self::MAX_LEN],
        };
        name.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(name)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn as_str(&self) -> &str {
        // `parse` admits ASCII only.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    pub fn is_default(&self) -> bool {
        *self == Self::DEFAULT
    }
}

impl std::str::FromStr for WorkspaceName {
    type Err = InvalidWorkspaceName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        WorkspaceName::parse(name.as_bytes()).ok_or(InvalidWorkspaceName)
    }
}

/// Not `[a-z0-9][a-z0-9-]{0,31}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidWorkspaceName;

impl fmt::Display for InvalidWorkspaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a workspace name is 1 to 32 of a-z, 0-9 and '-', not starting with '-'")
    }
}

impl std::error::Error for InvalidWorkspaceName {}

impl fmt::Debug for WorkspaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WorkspaceName({:?})", self.as_str())
    }
}

impl fmt::Display for WorkspaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lower_case_letters_digits_and_inner_dashes() {
        for good in [
            "default",
            "a",
            "brand-a",
            "0",
            "a-",
            "x".repeat(32).as_str(),
        ] {
            let name = WorkspaceName::parse(good.as_bytes()).expect(good);
            assert_eq!(name.as_str(), good);
        }
        for bad in [
            "",
            "-a",
            "Brand",
            "brand_a",
            "brand a",
            "brand.a",
            "é",
            "x".repeat(33).as_str(),
        ] {
            assert_eq!(WorkspaceName::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn default_is_the_parsed_name() {
        assert_eq!(
            WorkspaceName::parse(b"default"),
            Some(WorkspaceName::DEFAULT)
        );
        assert!(WorkspaceName::DEFAULT.is_default());
        assert!(!"defaults".parse::<WorkspaceName>().unwrap().is_default());
    }
}
