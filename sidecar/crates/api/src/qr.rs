//! `GET /api/v1/links/{code}/qr`: the QR code of a link's short URL, as SVG or PNG.
//!
//! The image holds only the short URL (on the request's issuing domain, like `short_url` in every
//! answer), never the target: a printed code keeps working when the target changes, and a code
//! leaks nothing a recipient does not see anyway. Error correction M (15%) survives print and
//! screen wear at the size of a URL shortener's codes. Both renderings are built here from the
//! module matrix, so the SVG carries no text from the request at all.

use super::{AppState, DomainContext, Error, ErrorBody, InWorkspace, Path, Query, Result};
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use qrcode::{Color, EcLevel, QrCode};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use shortlink_model::LinkState;
use shortlink_store as storage;
use utoipa::IntoParams;

pub fn router() -> Router<AppState> {
    Router::new().route("/links/{code}/qr", get(link_qr))
}

pub const DEFAULT_SIZE: u32 = 256;
pub const MIN_SIZE: u32 = 64;
pub const MAX_SIZE: u32 = 2048;
/// The quiet zone the QR specification asks for.
pub const DEFAULT_MARGIN: u32 = 4;
pub const MAX_MARGIN: u32 = 16;

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum QrFormat {
    #[default]
    Svg,
    Png,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QrParams {
    /// `svg` (default) or `png`.
    #[param(value_type = Option<String>, pattern = "^(svg|png)$")]
    pub format: Option<QrFormat>,
    /// Width and height in pixels, 64..=2048 (default 256). A PNG is the largest whole number of
    /// pixels per module that fits.
    #[param(minimum = 64, maximum = 2048)]
    pub size: Option<u32>,
    /// Quiet zone around the code, in modules, 0..=16 (default 4, as the QR specification asks).
    #[param(minimum = 0, maximum = 16)]
    pub margin: Option<u32>,
}

/// The QR code of a live link's short URL.
#[utoipa::path(get, path = "/api/v1/links/{code}/qr", tag = "links",
    params(("code" = String, Path), QrParams),
    responses(
        (status = 200, description = "the image, with an `ETag`",
            content((String = "image/svg+xml"), (String = "image/png"))),
        (status = 304, description = "`If-None-Match` matched the `ETag`"),
        (status = 400, description = "`invalid_query`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 410, description = "the link has expired or was revoked", body = ErrorBody),
        (status = 422, description = "`no_public_base`: no issuing domain is configured", body = ErrorBody),
    ))]
pub async fn link_qr(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    domains: DomainContext,
    Path(code): Path<String>,
    Query(params): Query<QrParams>,
    headers: HeaderMap,
) -> Result<Response> {
    let size = params.size.unwrap_or(DEFAULT_SIZE);
    let margin = params.margin.unwrap_or(DEFAULT_MARGIN);
    if !(MIN_SIZE..=MAX_SIZE).contains(&size) || margin > MAX_MARGIN {
        return Err(Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_query",
            message: format!("size must be {MIN_SIZE} to {MAX_SIZE} and margin 0 to {MAX_MARGIN}"),
        });
    }
    let link = state.links.get(workspace, &code).await?;
    if link.state(storage::now()) != LinkState::Live {
        return Err(Error::Gone);
    }
    let short_url = domains
        .short_url(&link.code, link.campaign.as_deref())
        .ok_or_else(|| Error::Request {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "no_public_base",
            message: "no issuing domain: set --public-base-url or send X-Shortlink-Public-Base"
                .into(),
        })?;
    let format = params.format.unwrap_or_default();
    let etag = etag(&short_url, format, size, margin);
    if headers
        .get(IF_NONE_MATCH)
        .is_some_and(|value| value.as_bytes() == etag.as_bytes())
    {
        return Ok((StatusCode::NOT_MODIFIED, [(ETAG, etag)]).into_response());
    }
    let modules = Modules::encode(&short_url, margin)?;
    let (content_type, body) = match format {
        QrFormat::Svg => ("image/svg+xml", modules.svg(size).into_bytes()),
        QrFormat::Png => ("image/png", modules.png(size)?),
    };
    let headers = [
        (CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            ETAG,
            HeaderValue::from_str(&etag).map_err(|e| Error::Internal(Box::new(e)))?,
        ),
        // The issuing domain of a deployment may change (domain rotation): a day, not forever.
        (
            CACHE_CONTROL,
            HeaderValue::from_static("private, max-age=86400"),
        ),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    Ok((headers, body).into_response())
}

/// The QR code of `text` drawn as the API draws it: the console's inline image and downloads.
pub fn render(text: &str, format: QrFormat, size: u32) -> Result<(&'static str, Vec<u8>)> {
    let modules = Modules::encode(text, DEFAULT_MARGIN)?;
    Ok(match format {
        QrFormat::Svg => ("image/svg+xml", modules.svg(size).into_bytes()),
        QrFormat::Png => ("image/png", modules.png(size)?),
    })
}

/// Strong validator of one rendering: what is drawn and how.
fn etag(short_url: &str, format: QrFormat, size: u32, margin: u32) -> String {
    let digest = Sha256::digest(format!("{short_url}\n{format:?}\n{size}\n{margin}"));
    format!("\"{}\"", shortlink_model::validate::hex(&digest[..12]))
}

/// The module matrix with its quiet zone: `width` × `width`, row by row, `true` for dark.
struct Modules {
    width: u32,
    dark: Vec<bool>,
}

impl Modules {
    fn encode(text: &str, margin: u32) -> Result<Self> {
        let code = QrCode::with_error_correction_level(text, EcLevel::M)
            .map_err(|e| Error::Internal(Box::new(e)))?;
        let inner = code.width() as u32;
        let width = inner + 2 * margin;
        let colors = code.to_colors();
        let dark = (0..width * width)
            .map(|at| {
                let (x, y) = (at % width, at / width);
                let inside = |v: u32| (margin..margin + inner).contains(&v);
                inside(x)
                    && inside(y)
                    && colors[((y - margin) * inner + (x - margin)) as usize] == Color::Dark
            })
            .collect();
        Ok(Modules { width, dark })
    }

    fn is_dark(&self, x: u32, y: u32) -> bool {
        self.dark[(y * self.width + x) as usize]
    }

    /// One path of horizontal runs over a white square, in module units scaled by the viewBox.
    fn svg(&self, size: u32) -> String {
        let w = self.width;
        let mut path = String::new();
        for y in 0..w {
            let mut x = 0;
            while x < w {
                if !self.is_dark(x, y) {
                    x += 1;
                    continue;
                }
                let start = x;
                while x < w && self.is_dark(x, y) {
                    x += 1;
                }
                let run = x - start;
                path.push_str(&format!("M{start} {y}h{run}v1h-{run}z"));
            }
        }
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{size}\" height=\"{size}\" \
             viewBox=\"0 0 {w} {w}\" shape-rendering=\"crispEdges\">\
             <rect width=\"{w}\" height=\"{w}\" fill=\"#fff\"/>\
             <path fill=\"#000\" d=\"{path}\"/></svg>"
        )
    }

    /// 8-bit greyscale, whole pixels per module (a blurred module edge costs scanners more than
    /// a few pixels less than asked).
    fn png(&self, size: u32) -> Result<Vec<u8>> {
        let scale = (size / self.width).max(1);
        let side = self.width * scale;
        let mut pixels = Vec::with_capacity((side * side) as usize);
        for y in 0..side {
            for x in 0..side {
                pixels.push(if self.is_dark(x / scale, y / scale) {
                    0
                } else {
                    255
                });
            }
        }
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, side, side);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Eight);
        let internal = |e: png::EncodingError| Error::Internal(Box::new(e));
        let mut writer = encoder.write_header().map_err(internal)?;
        writer.write_image_data(&pixels).map_err(internal)?;
        writer.finish().map_err(internal)?;
        Ok(out)
    }
}
