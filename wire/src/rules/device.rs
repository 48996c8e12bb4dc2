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
/// One pass over the agent, looking for every marker at once (a marker's first byte picks the
/// few to compare): this runs on every click of a link with a device rule.
pub fn classify(agent: &[u8]) -> Device {
    const MACINTOSH: u8 = 1;
    const MOBILE: u8 = 2;
    const ANDROID: u8 = 4;
    const DESKTOP_OS: u8 = 8;
    const X11: u8 = 16;
    const LINUX: u8 = 32;
    let mut seen = 0;
    for (at, &byte) in agent.iter().enumerate() {
        let rest = &agent[at..];
        seen |= match byte {
            b'i' if rest.starts_with(b"iPhone")
                || rest.starts_with(b"iPad")
                || rest.starts_with(b"iPod") =>
            {
                return Device::Ios
            }
            b'M' if rest.starts_with(b"Macintosh") => MACINTOSH,
            b'M' if rest.starts_with(b"Mobile/") => MOBILE,
            b'A' if rest.starts_with(b"Android") => ANDROID,
            b'W' if rest.starts_with(b"Windows NT") => DESKTOP_OS,
            b'C' if rest.starts_with(b"CrOS") => DESKTOP_OS,
            b'X' if rest.starts_with(b"X11") => X11,
            b'L' if rest.starts_with(b"Linux") => LINUX,
            _ => continue,
        };
    }
    let all = |marks: u8| seen & marks == marks;
    if all(MACINTOSH | MOBILE) {
        Device::Ios
    } else if all(ANDROID) {
        Device::Android
    } else if all(DESKTOP_OS) || all(MACINTOSH) || all(X11 | LINUX) {
        Device::Desktop
    } else {
        Device::Other
    }
}
