//! A link's typed parts, below the layers that use them: the preview card and the click-time
//! rules in their API form, the normalised JSON text SQL keeps, and their `wire` form in the
//! record. The service checks what callers send with them; the projection encodes what SQL holds
//! with them; neither reaches into the other for it.

pub mod card;
mod invalid;
pub mod rules;
mod stored;

pub use invalid::{redirect_status, Invalid, DEFAULT_REDIRECT};
pub use stored::{Link, LinkExtras, LinkFlags, LinkState};
