//! Preview cards (issue 35) in their API form: what a caller writes, what SQL keeps (normalised
//! JSON text) and what a read returns. The card itself lives beside the record in Redis
//! (`wire::keys::preview_key`, `wire::preview::Card`), read only for preview fetchers.

use super::Invalid;
use crate::validate::UrlPolicy;
use serde::{Deserialize, Serialize};
use shortlink_wire::preview::{Card, MAX_DESCRIPTION, MAX_IMAGE, MAX_SITE_NAME, MAX_TITLE};
use utoipa::ToSchema;

/// What messaging apps draw for the link before anyone taps it (Open Graph and Twitter card
/// tags, served by nginx to preview fetchers only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CardSpec {
    #[schema(schema_with = schema::title)]
    pub title: String,
    #[schema(schema_with = schema::description)]
    pub description: String,
    #[schema(schema_with = schema::image)]
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schema::site_name)]
    pub site_name: Option<String>,
}

/// The fields' schemas, with `wire`'s limits (in characters: a schema cannot count UTF-8 bytes,
/// which the API does, answering 422 `invalid_preview` past them).
mod schema {
    use crate::schema::{max_bytes, max_normalised_bytes, PRINTABLE, URL_PATTERN};
    use shortlink_wire::preview::{MAX_DESCRIPTION, MAX_IMAGE, MAX_SITE_NAME, MAX_TITLE};
    use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};

    fn text(what: &str, max: usize, nullable: bool) -> Schema {
        let kind = if nullable {
            SchemaType::from_iter([Type::String, Type::Null])
        } else {
            SchemaType::from(Type::String)
        };
        ObjectBuilder::new()
            .schema_type(kind)
            .min_length(Some(1))
            .max_length(Some(max))
            .extensions(max_bytes(max))
            .pattern(Some(PRINTABLE))
            .description(Some(format!(
                "{what}: 1 to {max} bytes (UTF-8) without control characters."
            )))
            .into()
    }

    pub fn title() -> Schema {
        text("The card's title", MAX_TITLE, false)
    }

    pub fn description() -> Schema {
        text("The card's text", MAX_DESCRIPTION, false)
    }

    pub fn site_name() -> Schema {
        text("The site's name, above the title", MAX_SITE_NAME, true)
    }

    pub fn image() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(URL_PATTERN.replacen(
                "[Hh][Tt][Tt][Pp][Ss]?",
                "[Hh][Tt][Tt][Pp][Ss]",
                1,
            )))
            .max_length(Some(MAX_IMAGE))
            .extensions(max_normalised_bytes(MAX_IMAGE))
            .description(Some(format!(
                "The card's image: an absolute https URL of at most {MAX_IMAGE} bytes, checked \
                 as a target is."
            )))
            .into()
    }
}

impl CardSpec {
    /// The card as Redis keeps it.
    pub fn encode(&self) -> Vec<u8> {
        self.card().encode()
    }

    /// The card as `wire` draws it.
    pub fn card(&self) -> Card<'_> {
        Card {
            title: &self.title,
            description: &self.description,
            image: &self.image,
            site_name: self.site_name.as_deref().unwrap_or(""),
        }
    }
}

/// The `preview` column of a request's card: its normalised JSON, `None` for none (absent or
/// `null`). Errors name the field and its limit.
pub fn column(
    policy: &UrlPolicy,
    own_domains: &[String],
    value: Option<CardSpec>,
) -> Result<Option<String>, Invalid> {
    let Some(mut card) = value else {
        return Ok(None);
    };
    text("preview.title", &card.title, MAX_TITLE)?;
    text("preview.description", &card.description, MAX_DESCRIPTION)?;
    if let Some(site_name) = &card.site_name {
        text("preview.site_name", site_name, MAX_SITE_NAME)?;
    }
    let image = policy
        .check(&card.image, own_domains)
        .map_err(|error| Invalid::new(error.code(), format!("preview.image: {error}")))?
        .into_string();
    // Messaging apps fetch the image themselves and refuse plain http ones; the limit is the
    // card's, after normalisation (punycode may lengthen a host).
    if !image.starts_with("https://") || image.len() > MAX_IMAGE {
        return Err(Invalid::new(
            "invalid_preview",
            format!("preview.image must be an https URL of at most {MAX_IMAGE} bytes"),
        ));
    }
    card.image = image;
    Ok(Some(
        serde_json::to_string(&card).expect("a card serialises"),
    ))
}

fn text(field: &str, value: &str, max: usize) -> Result<(), Invalid> {
    if value.is_empty() || value.len() > max || value.chars().any(char::is_control) {
        return Err(Invalid::new(
            "invalid_preview",
            format!("{field} must be 1 to {max} bytes (UTF-8) without control characters"),
        ));
    }
    Ok(())
}

/// A stored card, as [`column`] wrote it.
pub fn parse_stored(text: &str) -> Result<CardSpec, serde_json::Error> {
    serde_json::from_str(text)
}
