//! Compose's items: a recipient checked into its link, and answered with its message.

use super::recipients::{self, Input};
use crate::batch::body::RawItem;
use crate::batch::pipeline::{Answer, Checked, Items};
use crate::{links, AppState, DomainContext, Error};
use serde::Serialize;
use shortlink_core::service::compose::{Campaign, Message, Summary};
use shortlink_sms::E164;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The answer's formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Ndjson,
    Csv,
}

/// The CSV answer's columns.
pub const CSV_COLUMNS: &str = "index,status,ref,phone,code,short_url,text,encoding,characters,\
    units,segments,over_budget,replaced,forced_ucs2,error_code,error_message\n";

/// What a recipient keeps from its check to its answer.
pub struct Kept {
    recipient_ref: Option<String>,
    phone: Option<E164>,
    variables: BTreeMap<String, String>,
    /// Characters of its code (for a dry run's stand-in link).
    code_len: usize,
}

/// A request's recipients: how they are read, checked and answered.
pub struct Recipients {
    pub state: AppState,
    /// The workspace its links go to.
    pub workspace: shortlink_model::WorkspaceId,
    /// Its quotas: recipients past the limit are refused.
    pub budget: crate::Budget,
    pub domains: DomainContext,
    pub campaign: Campaign,
    pub campaign_name: Option<String>,
    /// Every link's click id parameter, unless its recipient's `link` sets one.
    pub click_id_param: Option<String>,
    pub input: Input,
    pub output: Output,
    /// The longest issuing base as the text carries it (scheme stripped if asked): the
    /// budget's bound on every message.
    pub longest_base: String,
    /// The base a dry run's stand-in links show (never a drained domain's), as the text carries it.
    pub stand_in_base: String,
    pub summary: Mutex<Summary>,
    /// The send job its messages go to (`send=true`).
    pub sends: Option<shortlink_messaging::gateway::job::Queue>,
}

/// One recipient's answer.
#[derive(Serialize, Default, utoipa::ToSchema)]
pub struct RecipientResult {
    /// The recipient's line, from 0 (the CSV header is not counted).
    index: i64,
    /// 201 created, 200 found (`idempotent`), 0 in a dry run, else the error's status.
    status: u16,
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    #[schema(rename = "ref")]
    recipient_ref: Option<String>,
    /// E.164.
    #[serde(skip_serializing_if = "Option::is_none")]
    phone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    short_url: Option<String>,
    /// The message as it will be sent (look-alikes replaced if that was asked and saved
    /// segments). In a dry run the link is the longest it can be, its code as `x`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    /// `GSM-7`, `GSM-7 locking:turkish single:turkish`, `UCS-2`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    characters: Option<usize>,
    /// Septets (GSM-7, an extension character counts two) or UTF-16 units (UCS-2).
    #[serde(skip_serializing_if = "Option::is_none")]
    units: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    segments: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    over_budget: Option<bool>,
    /// Look-alikes replaced: character position in the template's output, from, to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    replaced: Vec<Replaced>,
    /// The characters that forced UCS-2, with their positions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    forced_ucs2: Vec<Forced>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<crate::ErrorDetail>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Replaced {
    position: usize,
    from: String,
    to: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Forced {
    position: usize,
    #[serde(rename = "char")]
    #[schema(rename = "char")]
    ch: String,
}

/// The last line of an NDJSON answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SummaryLine {
    pub summary: Summary,
    /// With `send=true`: the send job (`GET /api/v1/gateway/jobs/{job}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_job: Option<String>,
}

impl Items for Recipients {
    type Kept = Kept;
    const VIA: &'static str = "compose";

    fn check(&self, index: i64, item: RawItem) -> Checked<Kept> {
        if let Err(over) = self.budget.admits_recipient(index) {
            return Checked::Refused(over.into(), None);
        }
        let line = match self.input.parse(item) {
            Ok(line) => line,
            Err(error) => return Checked::Refused(error, None),
        };
        let code_len = (line.link.as_ref())
            .and_then(|options| options.get("code")?.as_str().map(|c| c.chars().count()))
            .unwrap_or_else(|| self.state.links.scheme().code_len());
        let mut kept = Kept {
            recipient_ref: line.recipient_ref.clone(),
            phone: None,
            variables: BTreeMap::new(),
            code_len,
        };
        let link_len = self.longest_base.chars().count() + 1 + code_len;
        let mut scratch = String::new();
        let prepared = match self
            .campaign
            .prepare(&line.recipient, link_len, &mut scratch)
        {
            Ok(prepared) => prepared,
            Err(error) => return Checked::Refused(recipient_error(&error), Some(kept)),
        };
        kept.phone = Some(prepared.phone);
        kept.variables = line.recipient.variables;
        let request = recipients::link_request(
            prepared.target,
            self.campaign_name.clone(),
            line.recipient_ref,
            line.link,
        );
        match request.and_then(|mut request| {
            if request.click_id_param.is_none() {
                request.click_id_param = self.click_id_param.clone();
            }
            links::new_link(&self.state, self.workspace, &self.domains, request)
        }) {
            Ok(new) => Checked::Valid(new, kept),
            Err(error) => Checked::Refused(error, Some(kept)),
        }
    }

    fn render(&self, out: &mut Vec<u8>, index: i64, answer: Answer<Kept>) {
        let result = self.result(index, answer);
        match self.output {
            Output::Ndjson => {
                if serde_json::to_writer(&mut *out, &result).is_err() {
                    out.extend_from_slice(b"{}");
                }
                out.push(b'\n');
            }
            Output::Csv => csv_row(out, &result),
        }
    }
}

impl Recipients {
    fn result(&self, index: i64, answer: Answer<Kept>) -> RecipientResult {
        let (status, kept, link) = match answer {
            Answer::Refused(error, kept) => return self.refused(index, &error, kept),
            Answer::Link { link, status, kept } => (status.as_u16(), kept, Some(link)),
            Answer::Planned(kept) => (0, kept, None),
        };
        let short_url = (link.as_ref())
            .and_then(|link| self.domains.short_url(&link.code, link.campaign.as_deref()));
        let stand_in;
        let link_text = match &short_url {
            Some(url) => self.campaign.link_text(url),
            None => {
                stand_in = format!("{}/{}", self.stand_in_base, "x".repeat(kept.code_len));
                &stand_in
            }
        };
        let message = match self.campaign.compose(&kept.variables, link_text) {
            Ok(message) => message,
            Err(error) => return self.refused(index, &recipient_error(&error), Some(kept)),
        };
        self.count(index, Some(&message), false);
        if let (Some(queue), Some(link), Some(phone)) = (&self.sends, &link, &kept.phone) {
            queue.push(shortlink_visits::deliveries::Pending {
                index,
                code: link.code.clone(),
                short_url: short_url.clone(),
                phone: phone.to_string(),
                text: message.analysis.text.clone(),
            });
        }
        let analysis = message.analysis;
        let measure = analysis.measure;
        RecipientResult {
            index,
            status,
            recipient_ref: kept.recipient_ref,
            phone: kept.phone.map(|p| p.to_string()),
            code: link.map(|link| link.code),
            short_url,
            encoding: Some(measure.encoding.to_string()),
            characters: Some(measure.chars),
            units: Some(measure.units),
            segments: Some(measure.segments),
            over_budget: Some(message.over_budget),
            replaced: (analysis.replacements.iter())
                .map(|r| Replaced {
                    position: r.position,
                    from: r.from.to_string(),
                    to: r.to.to_owned(),
                })
                .collect(),
            forced_ucs2: (analysis.forced_ucs2.iter())
                .map(|f| Forced {
                    position: f.position,
                    ch: f.ch.to_string(),
                })
                .collect(),
            text: Some(analysis.text),
            error: None,
        }
    }

    fn refused(&self, index: i64, error: &Error, kept: Option<Kept>) -> RecipientResult {
        shortlink_core::metrics::api_error(error.code());
        self.count(index, None, error.code() == OVER_BUDGET);
        let (recipient_ref, phone) = kept.map_or((None, None), |k| (k.recipient_ref, k.phone));
        RecipientResult {
            index,
            status: error.status_code().as_u16(),
            recipient_ref,
            phone: phone.map(|p| p.to_string()),
            error: Some(crate::ErrorDetail {
                code: error.code().to_owned(),
                message: error.message(),
            }),
            ..RecipientResult::default()
        }
    }

    fn count(&self, index: i64, message: Option<&Message>, refused_over_budget: bool) {
        let over = refused_over_budget || message.is_some_and(|m| m.over_budget);
        let mut summary = self.summary.lock().unwrap_or_else(|p| p.into_inner());
        summary.add(index, message, over);
    }

    /// The answer's last line: the campaign's totals.
    pub fn summary_line(&self) -> Vec<u8> {
        let summary =
            std::mem::take(&mut *self.summary.lock().unwrap_or_else(|p| p.into_inner())).finish();
        let mut out = Vec::new();
        match self.output {
            Output::Ndjson => {
                let line = SummaryLine {
                    summary,
                    send_job: self.sends.as_ref().map(|queue| queue.job.clone()),
                };
                if serde_json::to_writer(&mut out, &line).is_err() {
                    out.extend_from_slice(b"{}");
                }
                out.push(b'\n');
            }
            Output::Csv => {
                // A last row named `summary`: the billed segments and the messages over budget
                // in their columns, every total as JSON in `text`.
                let json = serde_json::to_string(&summary).unwrap_or_default();
                let mut writer = csv::WriterBuilder::new().from_writer(&mut out);
                let (segments, over) = (
                    summary.segments.to_string(),
                    summary.over_budget.to_string(),
                );
                let row = [
                    "summary", "", "", "", "", "", &json, "", "", "", &segments, &over, "", "", "",
                    "",
                ];
                let _ = writer.write_record(row);
                let _ = writer.flush();
            }
        }
        out
    }
}

/// The error code of a recipient refused for the budget.
pub const OVER_BUDGET: &str = "over_budget";

/// A recipient's error as the API words it.
fn recipient_error(error: &shortlink_core::service::compose::RecipientError) -> Error {
    use shortlink_core::service::compose::RecipientError;
    let code = match error {
        RecipientError::Phone(_) => "invalid_phone",
        RecipientError::Render(_) => "invalid_variables",
        RecipientError::NoUrl => "missing_url",
        RecipientError::Url(_) => "invalid_url",
        RecipientError::OverBudget { .. } => OVER_BUDGET,
    };
    Error::invalid(code, error.to_string())
}

/// One result as a CSV row of [`CSV_COLUMNS`].
fn csv_row(out: &mut Vec<u8>, r: &RecipientResult) {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let number = |v: Option<usize>| v.map(|n| n.to_string()).unwrap_or_default();
    let replaced: Vec<String> = (r.replaced.iter())
        .map(|x| format!("{}@{}>{}", x.from, x.position, x.to))
        .collect();
    let forced: Vec<String> = (r.forced_ucs2.iter())
        .map(|x| format!("{}@{}", x.ch, x.position))
        .collect();
    let (error_code, error_message) = match &r.error {
        Some(e) => (e.code.clone(), e.message.clone()),
        None => Default::default(),
    };
    // Text others chose (ref, phone, message, errors quoting them) opens as text in a
    // spreadsheet, never as a formula.
    let row = [
        r.index.to_string(),
        if r.status == 0 {
            String::new()
        } else {
            r.status.to_string()
        },
        text(&r.recipient_ref),
        text(&r.phone),
        text(&r.code),
        text(&r.short_url),
        text(&r.text),
        text(&r.encoding),
        number(r.characters),
        number(r.units),
        number(r.segments),
        r.over_budget.map(|b| b.to_string()).unwrap_or_default(),
        replaced.join(" "),
        forced.join(" "),
        error_code,
        error_message,
    ];
    let mut writer = csv::WriterBuilder::new().from_writer(out);
    let cells: Vec<_> = row
        .iter()
        .map(|cell| shortlink_core::csv_cell::neutralise(cell))
        .collect();
    let _ = writer.write_record(cells.iter().map(|cell| cell.as_bytes()));
    let _ = writer.flush();
}
