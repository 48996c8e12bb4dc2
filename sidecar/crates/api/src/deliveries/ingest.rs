//! `POST /api/v1/deliveries`: one receipt as a JSON object, or an NDJSON batch answered line by
//! line as the conversions' (`{index, status, delivery | error}`).

use super::proof::WorkspaceDomains;
use super::receipt::{check, invalid, record, refusal, watch, DeliveryRequest, DeliveryView};
use crate::ndjson::{self, Ingest};
use crate::{AppState, Error, ErrorBody, InWorkspace, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::{Gateway, NewReceipt};

/// Most lines in one NDJSON request, the longest line (a receipt is a few hundred bytes), and
/// the most bytes in all: 100,000 receipts of up to 670 bytes each on average. The same limit
/// through nginx (its `location = /api/v1/deliveries`) and on the sidecar's own port, where a
/// body is refused (413) once that much of it has arrived, never held whole.
pub const LIMITS: ndjson::Limits = ndjson::Limits {
    lines: 100_000,
    line_bytes: 4096,
    body_bytes: 64 << 20,
};
/// Lines checked and handed to the store together (it writes them 500 a transaction).
const BATCH: usize = 10_000;

/// A receipt's JSON; a refusal names the field at fault (`` `at`: invalid type… ``).
fn parse(bytes: &[u8]) -> Result<DeliveryRequest> {
    let malformed = |message: String| Error::Request {
        status: StatusCode::BAD_REQUEST,
        code: "malformed_json",
        message,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let request: DeliveryRequest =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            match error.path().to_string().as_str() {
                "." => malformed(error.into_inner().to_string()),
                path => malformed(format!("`{path}`: {}", error.into_inner())),
            }
        })?;
    deserializer
        .end()
        .map_err(|error| malformed(error.to_string()))?;
    Ok(request)
}

/// Record delivery receipts: one JSON object, answered 201 (stored) or 200 (`duplicate`: this
/// `message_id` and `state` were reported before; nothing changed); or with `Content-Type:
/// application/x-ndjson`, one object per line (at most 100,000 lines and 64 MiB, else 413 and
/// nothing stored), answered with one line each,
/// in order: `{index, status, delivery | error}`. A link of another workspace answers as a
/// missing one. No phone number is taken.
#[utoipa::path(post, path = "/api/v1/deliveries", tag = "deliveries",
    request_body(content = DeliveryRequest,
        description = "one object, or one per line with `Content-Type: application/x-ndjson`"),
    responses(
        (status = 201, description = "stored", body = DeliveryView),
        (status = 200, description = "a repeat of a `message_id` and `state`: the first \
            receipt, `duplicate` true; NDJSON: one `{index, status, delivery | error}` per line",
            body = DeliveryView),
        (status = 400, description = "`malformed_json`: not a `DeliveryRequest`", body = ErrorBody),
        (status = 404, description = "`unknown_link`: no such link in this workspace", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: past 100,000 lines, 4,096 bytes a \
            line or 64 MiB; nothing stored", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "`invalid_link` (not exactly one of `code`, `short_url`, \
            `campaign` + `ref`), `foreign_domain` (a `short_url` host that is not one of the \
            workspace's domains), `invalid_short_url`, `invalid_message_id`, `invalid_state`, \
            `invalid_error_code`, `invalid_carrier`, `invalid_at`", body = ErrorBody),
    ))]
pub async fn post_deliveries(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    headers: HeaderMap,
    body: Body,
) -> Result<Response> {
    match ndjson::ingest(&headers, body, LIMITS).await? {
        Ingest::One(bytes) => {
            let now = shortlink_store::now();
            let new = check(parse(&bytes)?, Gateway::Api, now).map_err(invalid)?;
            record(&state, workspace, new).await
        }
        Ingest::Lines(lines) => {
            let mut out = Vec::with_capacity(lines.len() * 300);
            let mut batches = batches(lines);
            let mut checking = batches.next().map(check_batch);
            let mut first = 0;
            while let Some(batch) = checking.take() {
                let (checked, now) = batch.await.map_err(|error| Error::Internal(error.into()))?;
                // The next lines are checked on another thread while these are stored.
                checking = batches.next().map(check_batch);
                let count = checked.len() as i64;
                answer_lines(&state, workspace, first, checked, now, &mut out).await?;
                first += count;
            }
            Ok(ndjson::answer(out))
        }
    }
}

/// The request's lines, [`BATCH`] at a time, in order.
fn batches(lines: Vec<Vec<u8>>) -> impl Iterator<Item = Vec<Vec<u8>>> {
    let mut lines = lines.into_iter().peekable();
    std::iter::from_fn(move || {
        lines.peek()?;
        Some(lines.by_ref().take(BATCH).collect())
    })
}

/// Each line's receipt or the refusal of it, checked at the time returned.
type Checked = (Vec<Result<NewReceipt>>, DateTime<Utc>);

/// Parses and checks `lines` on a blocking thread: the CPU they take overlaps the store's
/// writing of the lines before them.
fn check_batch(lines: Vec<Vec<u8>>) -> tokio::task::JoinHandle<Checked> {
    tokio::task::spawn_blocking(move || {
        let now = shortlink_store::now();
        let checked = (lines.iter())
            .map(|line| parse(line).and_then(|r| check(r, Gateway::Api, now).map_err(invalid)))
            .collect();
        (checked, now)
    })
}

/// Records checked NDJSON lines (numbered from `first`) and appends one answer line each to `out`, in
/// order. The lines that pass the checks are stored together; a line refused stores nothing of
/// its own and nothing of the others changes. Errs when the database fails: the rest would
/// fail alike, and the sender retries the batch (what went in answers as duplicates).
async fn answer_lines(
    state: &AppState,
    workspace: WorkspaceId,
    first: i64,
    checked: Vec<Result<NewReceipt>>,
    now: DateTime<Utc>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let named = |c: &Result<NewReceipt>| c.as_ref().is_ok_and(|n| n.short_domain.is_some());
    let checked: Vec<Result<NewReceipt>> = match checked.iter().any(named) {
        false => checked,
        true => {
            let domains = WorkspaceDomains::of(state, workspace).await?;
            (checked.into_iter())
                .map(|checked| checked.and_then(|mut new| domains.admit(&mut new).map(|()| new)))
                .collect()
        }
    };
    let valid: Vec<NewReceipt> = (checked.iter())
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let store = state.analytics.store.deliveries();
    let recorded = store.record_receipts(workspace, &valid, now).await?;
    let stored = (valid.iter().zip(&recorded))
        .filter_map(|(new, answer)| answer.as_ref().ok().map(|recorded| (new, recorded)));
    watch(state, workspace, stored).await;
    let answers = ndjson::in_line_order(checked, recorded.into_iter().map(|r| r.map_err(refusal)))?;
    for (offset, answer) in answers.into_iter().enumerate() {
        let answer = answer.map(|recorded| {
            let duplicate = recorded.duplicate;
            (DeliveryView::from(recorded), duplicate)
        });
        ndjson::write_line(out, first + offset as i64, "delivery", answer)?;
    }
    Ok(())
}
