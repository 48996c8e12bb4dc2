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
///
/// This runs on every click of a link with a device rule, so the markers are found by a byte
/// that is rare in agents (upper case; `iPhone` by its `P`), searched several bytes at a time
/// (`memchr`), and only the few places found are compared.
pub fn classify(agent: &[u8]) -> Device {
    let at = |i: usize, marker: &[u8]| agent[i..].starts_with(marker);
    let (mut macintosh, mut mobile, mut android) = (false, false, false);
    for i in memchr::memchr3_iter(b'P', b'M', b'A', agent) {
        match agent[i] {
            b'P' if i > 0 && (at(i - 1, b"iPhone") || at(i - 1, b"iPad") || at(i - 1, b"iPod")) => {
                return Device::Ios
            }
            b'M' => {
                macintosh |= at(i, b"Macintosh");
                mobile |= at(i, b"Mobile/");
            }
            b'A' => android |= at(i, b"Android"),
            _ => {}
        }
    }
    if macintosh && mobile {
        return Device::Ios;
    }
    if android {
        return Device::Android;
    }
    let mut x11 = false;
    for i in memchr::memchr3_iter(b'W', b'C', b'X', agent) {
        if at(i, b"Windows NT") || at(i, b"CrOS") {
            return Device::Desktop;
        }
        x11 |= at(i, b"X11");
    }
    let linux = || memchr::memchr_iter(b'L', agent).any(|i| at(i, b"Linux"));
    if macintosh || (x11 && linux()) {
        Device::Desktop
    } else {
        Device::Other
    }
}
