//! Composing SMS campaigns: which encoding a text needs, how many segments (billed parts) it
//! takes and where they break, templates rendered per recipient, and phone numbers in E.164.
//! No I/O; the sidecar's compose endpoint calls it once per recipient.
//!
//! - [`segments`]: [`measure`] (numbers only, no allocation) and [`analyze`] (plus the parts, the
//!   characters that forced UCS-2 with their positions, and the look-alikes replaced). The
//!   cheapest encoding among those allowed by [`Options`] wins: fewest segments, then GSM-7
//!   over UCS-2, then fewest national-language IEs, then fewest units.
//! - [`gsm`]: the TS 23.038 tables: default alphabet and extension table, and the locking-shift
//!   and single-shift tables of all 13 national languages (Turkish, Spanish — single shift only —,
//!   Portuguese, Bengali, Gujarati, Hindi, Kannada, Malayalam, Oriya, Punjabi, Tamil, Telugu, Urdu).
//! - [`lookalike`]: curly quotes, dashes, odd spaces, the ellipsis… and their GSM-7 stand-ins.
//! - [`template`]: `{{name}}` and `{{link}}` templates, parsed once with every error located,
//!   rendered per recipient under a length limit, or measured with only the link's length.
//! - [`phone`]: E.164 normalisation with a default country (libphonenumber's metadata).
//!
//! # Capacities
//!
//! An SMS carries 140 octets of user data (TS 23.040 §9.2.3.24). A user data header (UDH), when
//! present, takes its length octet (UDHL) plus its information elements (IEs); in GSM-7 the
//! septets then start on the next septet boundary, so a UDH of `h` octets costs `ceil(8h/7)`
//! septets. A concatenated message carries the 8-bit-reference concatenation IE (5 octets) in
//! every part; each national language shift table in use adds its IE (IEI 0x24 single shift or
//! 0x25 locking shift, 3 octets) to every part, and to a single SMS too.
//!
//! | encoding                          | UDH alone | units alone | UDH per part | units per part |
//! |-----------------------------------|-----------|-------------|--------------|----------------|
//! | GSM-7, default tables             | 0         | 160 septets | 6 octets     | 153 septets    |
//! | GSM-7, one national table         | 4 octets  | 155 septets | 9 octets     | 149 septets    |
//! | GSM-7, locking + single national  | 7 octets  | 152 septets | 12 octets    | 146 septets    |
//! | UCS-2                             | 0         | 70 units    | 6 octets     | 67 units       |
//!
//! A character of an extension (single-shift) table costs two septets (escape 0x1B and its
//! code), and the pair never straddles two parts. UCS-2 here is UTF-16 as handsets use it: a
//! character beyond the BMP is a surrogate pair, two units, never split. A part boundary may fall
//! inside a grapheme cluster (a flag, an emoji with a skin tone, a letter and a combining mark):
//! TS 23.040 concatenates octets and the handset reassembles before display; some gateways
//! (Twilio) keep clusters whole, which can cost a part more. Android computes the same header
//! costs (1 + 6 septets concatenated, 4 or 7 for one or two shift tables).
//!
//! Correctness is checked against independent implementations: `tests/oracle.rs` (100,000
//! messages through the npm package sms-segments-calculator) and `tests/tables.rs` (the tables
//! septet by septet, and 40,000 national-language messages, against the PyPI package gsmcodecs).

#![forbid(unsafe_code)]

pub mod gsm;
pub mod lookalike;
pub mod phone;
pub mod segments;
pub mod template;

pub use gsm::Language;
pub use phone::{normalize as normalize_phone, PhoneError, Region, E164};
pub use segments::{
    analyze, measure, Analysis, Capacity, Encoding, Forced, LanguageSet, Measure, Options, Part,
    Replacement,
};
pub use template::{Limits, RenderError, Template, TemplateError, TemplateErrors, Variables};
