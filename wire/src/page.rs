//! What every page a click can get carries, whoever draws it: the module, or the sidecar's
//! fallback while Redis is away (the "not yet", password and card pages are wire's own bytes).

/// Nothing on the pages loads anything (no script, style or image: a card's image is a tag for
/// fetchers, never shown; the password form posts to the page's own URL, which `default-src`
/// does not govern, and `form-action` is left out because browsers apply it to the 303 that
/// follows), no other site may frame them (a password form in a frame invites clickjacking), no
/// browser sniffs them into another type, and the short URL does not travel on in `Referer`.
pub const SECURITY_HEADERS: [(&str, &str); 3] = [
    (
        "Content-Security-Policy",
        "default-src 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
];
