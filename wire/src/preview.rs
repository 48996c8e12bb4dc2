//! A link's preview card: what messaging apps draw before anyone taps (Open Graph and Twitter
//! card tags), kept out of the hot record in `sl:p:<code>` ([`crate::keys::preview_key`]) and
//! read only when a preview fetcher ([`crate::agent::is_preview`]) asks for a link whose record
//! says it has one ([`crate::record::Extras::has_card`]).
//!
//! The value: a format byte ([`FORMAT`]), then title, description, image URL and site name, each
//! a little-endian `u16` length and UTF-8 bytes (length 0 = absent).

pub const FORMAT: u8 = 1;

/// The API refuses longer values; the decoder refuses a card holding them.
pub const MAX_TITLE: usize = 300;
pub const MAX_DESCRIPTION: usize = 1000;
pub const MAX_IMAGE: usize = 2048;
pub const MAX_SITE_NAME: usize = 100;

/// The status of a card page: a page, not a redirect, so the fetcher reads its tags.
pub const CARD_STATUS: u16 = 200;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Card<'a> {
    pub title: &'a str,
    pub description: &'a str,
    /// An absolute https URL (the API checks it as it checks targets).
    pub image: &'a str,
    pub site_name: &'a str,
}

impl Card<'_> {
    pub fn encode(&self) -> Vec<u8> {
        let fields = [self.title, self.description, self.image, self.site_name];
        let mut out = Vec::with_capacity(1 + fields.iter().map(|f| 2 + f.len()).sum::<usize>());
        out.push(FORMAT);
        for field in fields {
            out.extend((field.len() as u16).to_le_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        out
    }
}

/// The card in `value`, or `None` for a value this reader does not understand (the fetcher then
/// gets the plain redirect, as without a card).
pub fn decode(value: &[u8]) -> Option<Card<'_>> {
    let (&FORMAT, mut rest) = value.split_first()? else {
        return None;
    };
    let mut next = |max: usize| {
        let (len, tail) = rest.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_le_bytes(*len));
        if len > max || tail.len() < len {
            return None;
        }
        let (field, tail) = tail.split_at(len);
        rest = tail;
        std::str::from_utf8(field).ok()
    };
    let card = Card {
        title: next(MAX_TITLE)?,
        description: next(MAX_DESCRIPTION)?,
        image: next(MAX_IMAGE)?,
        site_name: next(MAX_SITE_NAME)?,
    };
    rest.is_empty().then_some(card)
}

/// The page a preview fetcher gets: the card's tags, escaped, and a refresh to `target` for a
/// browser that lands here anyway. The module and the fallback send these very bytes.
pub fn card_page(card: &Card<'_>, target: &[u8]) -> Vec<u8> {
    // Targets are visible ASCII (the record's decoder checks), so this is never lossy.
    let target = String::from_utf8_lossy(target);
    let mut page = String::with_capacity(1024);
    page.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
    if !card.title.is_empty() {
        push_element(&mut page, "<title>", card.title, "</title>");
    }
    let mut meta = |attribute: &str, name: &str, value: &str| {
        if value.is_empty() {
            return;
        }
        page.push_str("<meta ");
        page.push_str(attribute);
        page.push_str("=\"");
        page.push_str(name);
        page.push_str("\" content=\"");
        escape_into(&mut page, value);
        page.push_str("\">");
    };
    meta("property", "og:type", "website");
    meta("property", "og:url", &target);
    meta("property", "og:title", card.title);
    meta("property", "og:description", card.description);
    meta("property", "og:image", card.image);
    meta("property", "og:site_name", card.site_name);
    let kind = if card.image.is_empty() {
        "summary"
    } else {
        "summary_large_image"
    };
    meta("name", "twitter:card", kind);
    meta("name", "twitter:title", card.title);
    meta("name", "twitter:description", card.description);
    meta("name", "twitter:image", card.image);
    meta("http-equiv", "refresh", &format!("0; url={target}"));
    page.push_str("</head><body>");
    push_element(&mut page, "<p><a href=\"", &target, "\">");
    escape_into(
        &mut page,
        if card.title.is_empty() {
            &target
        } else {
            card.title
        },
    );
    page.push_str("</a></p></body></html>\n");
    page.into_bytes()
}

fn push_element(page: &mut String, open: &str, text: &str, close: &str) {
    page.push_str(open);
    escape_into(page, text);
    page.push_str(close);
}

/// HTML-escapes `text` for element content and double- or single-quoted attribute values.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> Card<'static> {
        Card {
            title: "Spring sale: 20% off",
            description: "Today only, in every shop.",
            image: "https://cdn.example/spring.jpg",
            site_name: "Example Shop",
        }
    }

    #[test]
    fn round_trips_and_refuses_what_it_does_not_understand() {
        let value = card().encode();
        assert_eq!(decode(&value), Some(card()));
        assert_eq!(decode(&Card::default().encode()), Some(Card::default()));
        assert_eq!(decode(&value[..value.len() - 1]), None);
        assert_eq!(decode(&[value.as_slice(), b"x"].concat()), None);
        assert_eq!(decode(&[&[2], &value[1..]].concat()), None);
        assert_eq!(decode(b""), None);
        let long = "x".repeat(MAX_TITLE + 1);
        assert_eq!(
            decode(
                &Card {
                    title: &long,
                    ..card()
                }
                .encode()
            ),
            None
        );
    }

    #[test]
    fn the_page_carries_every_tag_escaped() {
        let hostile = Card {
            title: "\"><script>alert(1)</script>",
            description: "Tom & Jerry's <b>",
            ..card()
        };
        let page =
            String::from_utf8(card_page(&hostile, b"https://shop.example/a?b=1&c=2")).unwrap();
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("content=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""));
        assert!(page.contains(
            "<meta property=\"og:description\" content=\"Tom &amp; Jerry&#39;s &lt;b&gt;\">"
        ));
        assert!(page
            .contains("<meta property=\"og:image\" content=\"https://cdn.example/spring.jpg\">"));
        assert!(page.contains("<meta name=\"twitter:card\" content=\"summary_large_image\">"));
        assert!(page.contains(
            "<meta http-equiv=\"refresh\" content=\"0; url=https://shop.example/a?b=1&amp;c=2\">"
        ));
        assert!(page
            .contains("<meta property=\"og:url\" content=\"https://shop.example/a?b=1&amp;c=2\">"));
    }
}
