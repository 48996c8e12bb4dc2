//! Composing a campaign (issue 37): one SMS text per recipient with its link in it, its
//! encoding and its segments, and the campaign's totals.
//!
//! A [`Campaign`] is the template and its options, checked once before any recipient is read:
//! a template that cannot be rendered refuses the whole request, so nothing is issued for it.
//! Each recipient is then [prepared](Campaign::prepare) before its link is created (phone to
//! E.164, target URL, the message measured with the longest link it can get, refused if over
//! budget when asked), and [composed](Campaign::compose) once the link exists. The link's length
//! is known before it exists (shortlink's links are default-alphabet characters outside the
//! extension table), which is what makes the dry run exact.
//!
//! Phone numbers and variables are personal data: nothing here logs or stores them; they live
//! in the request and its answer only (a variable used in the URL template is part of the
//! target URL, which the link keeps).

use shortlink_sms::template::{Limits, RenderError, Template, TemplateErrors};
use shortlink_sms::{self as sms, Analysis, Encoding, Language, PhoneError, Region, E164};
use std::collections::BTreeMap;

/// Most segments a budget may name: the template's output limit is ten GSM-7 parts.
pub const MAX_BUDGET: usize = 10;
/// Recipients named per character that forced UCS-2, in the summary.
pub const FORCED_EXAMPLES: usize = 5;
/// Distinct characters that forced UCS-2 listed in the summary.
pub const FORCED_CHARS: usize = 100;

/// What happens to a recipient whose message is over the segment budget.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    utoipa::ToSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum OverBudget {
    /// Issued and flagged `over_budget`.
    #[default]
    Report,
    /// Refused (no link) with the error `over_budget`.
    Refuse,
}

/// A campaign as asked for, before it is checked.
#[derive(Clone, Debug, Default)]
pub struct CampaignSpec {
    /// The message: `{{name}}` for a variable, `{{link}}` for the recipient's short URL.
    pub template: String,
    /// The target URL of recipients that bring none, with `{{name}}` variables (percent-encoded
    /// when inserted).
    pub url_template: Option<String>,
    /// Most segments per message.
    pub budget: Option<usize>,
    pub over_budget: OverBudget,
    /// The short URL without `https://` in the text.
    pub strip_scheme: bool,
    /// Replace look-alikes (curly quotes, dashes, odd spaces) when that saves segments.
    pub replace_lookalikes: bool,
    /// National language shift tables the gateway supports (both tables of each).
    pub languages: Vec<String>,
    /// The country of numbers written without their country code (ISO 3166-1 alpha-2).
    pub country: Option<String>,
}

/// Why a campaign is refused before any recipient is read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CampaignError {
    #[error("the template cannot be used: {0}")]
    Template(TemplateErrors),
    #[error("the template has no {{{{link}}}}: the message would carry no link")]
    NoLink,
    #[error("the URL template cannot be used: {0}")]
    UrlTemplate(TemplateErrors),
    #[error("the URL template cannot contain {{{{link}}}}")]
    LinkInUrl,
    #[error("the template alone, with its link and every variable empty, is longer than {max} characters")]
    TooLong { max: usize },
    #[error("the budget is 1 to {MAX_BUDGET} segments")]
    Budget,
    #[error(transparent)]
    Language(#[from] sms::gsm::UnknownLanguage),
    #[error(transparent)]
    Country(#[from] sms::phone::UnknownRegion),
}

/// Why one recipient gets no message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipientError {
    #[error("invalid phone number: {0}")]
    Phone(#[from] PhoneError),
    #[error("{0}")]
    Render(RenderError),
    #[error("the recipient has no url and the campaign no url_template")]
    NoUrl,
    #[error("the URL template: {0}")]
    Url(RenderError),
    #[error("the message takes {segments} segments, over the budget of {budget}")]
    OverBudget { segments: usize, budget: usize },
}

/// A recipient as read.
#[derive(Clone, Debug, Default)]
pub struct Recipient {
    pub phone: String,
    /// The target URL; else the campaign's URL template.
    pub url: Option<String>,
    pub variables: BTreeMap<String, String>,
}

/// A recipient ready for its link: the number, and where the link goes.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub phone: E164,
    pub target: String,
}

/// One recipient's message.
#[derive(Clone, Debug)]
pub struct Message {
    pub analysis: Analysis,
    pub over_budget: bool,
}

/// A checked campaign.
#[derive(Clone, Debug)]
pub struct Campaign {
    template: Template,
    url_template: Option<Template>,
    pub budget: Option<usize>,
    pub over_budget: OverBudget,
    pub strip_scheme: bool,
    pub sms: sms::Options,
    pub country: Option<Region>,
}

impl Campaign {
    /// Checks `spec`: `known` says which variable names the recipients bring, `link_len` is the
    /// longest link text a recipient can get.
    pub fn new(
        spec: &CampaignSpec,
        known: impl Fn(&str) -> bool,
        link_len: usize,
    ) -> Result<Campaign, CampaignError> {
        let limits = Limits::default();
        let template =
            Template::parse(&spec.template, &known, &limits).map_err(CampaignError::Template)?;
        if !template.has_link() {
            return Err(CampaignError::NoLink);
        }
        let url_template = spec
            .url_template
            .as_deref()
            .map(|source| Template::parse(source, &known, &limits))
            .transpose()
            .map_err(CampaignError::UrlTemplate)?;
        if url_template.as_ref().is_some_and(Template::has_link) {
            return Err(CampaignError::LinkInUrl);
        }
        // Every message is at least the text around the variables: too long for everyone
        // means a mistake in the template, refused before anything is issued.
        let empty: BTreeMap<String, String> = template
            .variables()
            .into_iter()
            .map(|name| (name.to_owned(), String::new()))
            .collect();
        let link = "x".repeat(link_len);
        if let Err(RenderError::TooLong { max }) = template.render(&empty, &link) {
            return Err(CampaignError::TooLong { max });
        }
        if spec.budget.is_some_and(|b| !(1..=MAX_BUDGET).contains(&b)) {
            return Err(CampaignError::Budget);
        }
        let mut sms = sms::Options {
            replace_lookalikes: spec.replace_lookalikes,
            ..sms::Options::default()
        };
        for name in &spec.languages {
            sms = sms.with_language(name.parse::<Language>()?);
        }
        let country = spec.country.as_deref().map(str::parse).transpose()?;
        Ok(Campaign {
            template,
            url_template,
            budget: spec.budget,
            over_budget: spec.over_budget,
            strip_scheme: spec.strip_scheme,
            sms,
            country,
        })
    }

    /// The variables the message and the URL template use.
    pub fn variables(&self) -> Vec<&str> {
        let mut names = self.template.variables();
        for name in self.url_template.iter().flat_map(Template::variables) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// Checks a recipient before its link exists: its number, its target, and its message
    /// measured with a link of `link_len` characters (refused over the budget if asked).
    pub fn prepare(
        &self,
        recipient: &Recipient,
        link_len: usize,
        scratch: &mut String,
    ) -> Result<Prepared, RecipientError> {
        let phone = sms::normalize_phone(&recipient.phone, self.country)?;
        let measure = self.measure(&recipient.variables, link_len, scratch)?;
        if let (Some(budget), OverBudget::Refuse) = (self.budget, self.over_budget) {
            if measure.segments > budget {
                return Err(RecipientError::OverBudget {
                    segments: measure.segments,
                    budget,
                });
            }
        }
        let target = match (&recipient.url, &self.url_template) {
            (Some(url), _) => url.clone(),
            (None, Some(template)) => {
                let encoded: BTreeMap<String, String> = (template.variables().into_iter())
                    .filter_map(|name| {
                        let value = recipient.variables.get(name)?;
                        Some((name.to_owned(), url_encoded(value)))
                    })
                    .collect();
                template.render(&encoded, "").map_err(RecipientError::Url)?
            }
            (None, None) => return Err(RecipientError::NoUrl),
        };
        Ok(Prepared { phone, target })
    }

    /// The numbers of a message with these variables and a link of `link_len` characters.
    pub fn measure(
        &self,
        variables: &BTreeMap<String, String>,
        link_len: usize,
        scratch: &mut String,
    ) -> Result<sms::Measure, RecipientError> {
        (self.template)
            .measure_with_link_len(variables, link_len, &self.sms, scratch)
            .map_err(RecipientError::Render)
    }

    /// The link as the text carries it: the short URL, without its scheme if asked.
    pub fn link_text<'a>(&self, short_url: &'a str) -> &'a str {
        match self.strip_scheme {
            true => without_scheme(short_url),
            false => short_url,
        }
    }

    /// The message of a recipient whose link text is `link`.
    pub fn compose(
        &self,
        variables: &BTreeMap<String, String>,
        link: &str,
    ) -> Result<Message, RecipientError> {
        let text = self
            .template
            .render(variables, link)
            .map_err(RecipientError::Render)?;
        let analysis = sms::analyze(&text, &self.sms);
        let over_budget = self
            .budget
            .is_some_and(|budget| analysis.measure.segments > budget);
        Ok(Message {
            analysis,
            over_budget,
        })
    }
}

/// A URL without its `https://` or `http://`.
pub fn without_scheme(url: &str) -> &str {
    (url.strip_prefix("https://"))
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url)
}

/// `value` percent-encoded for a URL: everything but RFC 3986's unreserved characters, so a
/// value can neither end a query parameter nor start another.
fn url_encoded(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The campaign's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Summary {
    /// Recipients read.
    pub recipients: u64,
    /// Recipients with a message (a link, or a planned one in a dry run).
    pub composed: u64,
    /// Recipients refused, each with its error on its own line.
    pub failed: u64,
    /// Segments of every composed message: what the campaign will be billed.
    pub segments: u64,
    /// Composed messages by their number of segments (`{"1": 9500, "2": 500}`).
    pub by_segments: BTreeMap<usize, u64>,
    /// Composed messages over the budget (report mode), or refused for it (refuse mode).
    pub over_budget: u64,
    /// Composed messages by encoding (`GSM-7`, `UCS-2`, `GSM-7 single:turkish`, …).
    pub encodings: BTreeMap<String, u64>,
    /// Composed messages in which look-alikes were replaced.
    pub replaced: u64,
    /// The characters that forced UCS-2, most frequent first.
    pub forced_ucs2: Vec<ForcedChar>,
}

/// A character that forced messages into UCS-2, and where.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ForcedChar {
    #[serde(rename = "char")]
    #[schema(rename = "char")]
    pub ch: String,
    /// `U+20AC`.
    pub codepoint: String,
    /// Messages it is in.
    pub messages: u64,
    /// The first few: recipient index and character position in the message.
    pub examples: Vec<Position>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Position {
    pub index: i64,
    pub position: usize,
}

impl Summary {
    /// Counts a recipient: its message, or `None` if refused (`over_budget`: refused for it).
    pub fn add(&mut self, index: i64, message: Option<&Message>, over_budget: bool) {
        self.recipients += 1;
        if over_budget {
            self.over_budget += 1;
        }
        let Some(message) = message else {
            self.failed += 1;
            return;
        };
        let measure = &message.analysis.measure;
        self.composed += 1;
        self.segments += measure.segments as u64;
        *self.by_segments.entry(measure.segments).or_default() += 1;
        *self
            .encodings
            .entry(measure.encoding.to_string())
            .or_default() += 1;
        if !message.analysis.replacements.is_empty() {
            self.replaced += 1;
        }
        if measure.encoding != Encoding::Ucs2 {
            return;
        }
        let mut seen = Vec::new();
        for forced in &message.analysis.forced_ucs2 {
            if seen.contains(&forced.ch) {
                continue;
            }
            seen.push(forced.ch);
            self.count_forced(forced.ch, index, forced.position);
        }
    }

    fn count_forced(&mut self, ch: char, index: i64, position: usize) {
        let at = match (self.forced_ucs2.iter()).position(|f| f.ch.chars().eq([ch])) {
            Some(at) => at,
            None if self.forced_ucs2.len() < FORCED_CHARS => {
                self.forced_ucs2.push(ForcedChar {
                    ch: ch.to_string(),
                    codepoint: format!("U+{:04X}", u32::from(ch)),
                    messages: 0,
                    examples: Vec::new(),
                });
                self.forced_ucs2.len() - 1
            }
            None => return,
        };
        let forced = &mut self.forced_ucs2[at];
        forced.messages += 1;
        if forced.examples.len() < FORCED_EXAMPLES {
            forced.examples.push(Position { index, position });
        }
    }

    /// The totals as answered: characters that forced UCS-2 most frequent first.
    pub fn finish(mut self) -> Summary {
        self.forced_ucs2
            .sort_by(|a, b| b.messages.cmp(&a.messages).then(a.ch.cmp(&b.ch)));
        self
    }
}
