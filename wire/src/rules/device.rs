//! The device class of a `User-Agent`, as a rule sees it: which store an "app install" link sends
//! the phone to. Four classes, told by a few substrings in one pass each: cheap enough for every
//! click, unlike the full agent parsing the visit pipeline does after the fact.

/// A device class; each has one bit in a [`Condition::Device`](super::Condition::Device) mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Ios,
    Android,
    Desktop,
    Other,
}

impl Device {
    pub const ALL: [Device; 4] = [Device::Ios, Device::Android, Device::Desktop, Device::Other];

    pub fn bit(self) -> u8 {
        match self {
            Device::Ios => 1,
            Device::Android => 2,
            Device::Desktop => 4,
            Device::Other => 8,
        }
    }

    /// The name the API uses.
    pub fn name(self) -> &'static str {
        match self {
            Device::Ios => "ios",
            Device::Android => "android",
            Device::Desktop => "desktop",
            Device::Other => "other",
        }
    }

    pub fn from_name(name: &str) -> Option<Device> {
        Device::ALL.into_iter().find(|device| device.name() == name)
    }
}

/// The class of `agent`. iPadOS Safari asks for desktop pages with a Mac agent, but still says
/// `Mobile/` (a Mac never does), so that one counts as iOS. Android before the desktop systems:
/// Android agents say `Linux`.
pub fn classify(agent: &[u8]) -> Device {
    if contains(agent, b"iPhone")
        || contains(agent, b"iPad")
        || contains(agent, b"iPod")
        || (contains(agent, b"Macintosh") && contains(agent, b"Mobile/"))
    {
        Device::Ios
    } else if contains(agent, b"Android") {
        Device::Android
    } else if contains(agent, b"Windows NT")
        || contains(agent, b"Macintosh")
        || contains(agent, b"CrOS")
        || (contains(agent, b"X11") && contains(agent, b"Linux"))
    {
        Device::Desktop
    } else {
        Device::Other
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}
