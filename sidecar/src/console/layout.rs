//! The page shell (navigation, sign-out form), the stylesheet and the script, all in the binary.

use super::operator::{InstanceOperator, Operator, Place};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, REFRESH};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

/// One small stylesheet; a single column under 40em so that every page works on a phone.
const CSS: &str = r#"
*{box-sizing:border-box}
body{margin:0;font:16px/1.45 system-ui,sans-serif;color:#1b1f24;background:#f6f7f9}
header{background:#1d3557;color:#fff;padding:.5em 1em;display:flex;flex-wrap:wrap;gap:.25em 1em;align-items:center}
header a{color:#fff;text-decoration:none;padding:.3em .2em}
header a:focus,header a:hover{text-decoration:underline}
header nav{margin-right:auto}
header form.switcher{display:flex;gap:.4em;align-items:center}
header form.switcher label{font-weight:400}
header select{padding:.2em}
main{max-width:72em;margin:0 auto;padding:1em}
h1{font-size:1.5em;margin:.3em 0 .6em}
h2{font-size:1.15em;margin:1.2em 0 .5em}
a{color:#1d4ed8}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(9em,1fr));gap:.75em}
.card{background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:.75em}
.card b{display:block;font-size:1.6em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:.35em .5em;border-bottom:1px solid #e3e6ea;vertical-align:top}
td.num,th.num{text-align:right}
.wide{overflow-x:auto}
form.stack{display:grid;gap:.4em;max-width:36em;background:#fff;padding:1em;border:1px solid #d8dde3;border-radius:6px}
form.inline{display:flex;flex-wrap:wrap;gap:.5em;align-items:end}
form.inline label{display:flex;flex-direction:column;font-size:.9em}
label{font-weight:600}
input,select,button,textarea{font:inherit;padding:.4em;border:1px solid #9aa4b1;border-radius:4px;max-width:100%}
button{background:#1d4ed8;color:#fff;border-color:#1d4ed8;cursor:pointer}
button.danger{background:#b91c1c;border-color:#b91c1c}
button.link{background:none;border:none;color:#fff;padding:.3em .2em}
:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
.error{color:#b91c1c;font-weight:600}
.ok{color:#15803d;font-weight:600}
.hint{color:#555;font-size:.9em}
.short{font-size:1.3em;word-break:break-all}
.qr svg{width:12em;height:12em;background:#fff}
figure{margin:0}
.chart svg{width:100%;height:auto;background:#fff;border:1px solid #d8dde3}
.chart .human{fill:#2563eb}.chart .bot{fill:#9ca3af}.chart .preview{fill:#f59e0b}
.chart .stage{fill:#93c5fd}.chart .rate{stroke:#15803d;stroke-width:2}.chart circle.rate{fill:#15803d}.chart .grid{stroke:#e3e6ea}
.domain-charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(24em,1fr));gap:1em;margin-bottom:1em}
.chart .clicks{stroke:#2563eb;stroke-width:2}.chart circle.clicks{fill:#2563eb}.chart .clicks.drained{stroke:#b91c1c}.chart circle.clicks.drained{fill:#b91c1c}.chart .peer{stroke:#c4c9d0;stroke-width:1}
.chart .marker line{stroke:#b91c1c;stroke-width:1.5;stroke-dasharray:4 3}.chart .marker.restore line{stroke:#15803d}.chart .marker text{fill:#b91c1c}.chart .marker.restore text{fill:#15803d}
.legend span{margin-right:1em}
.legend .human{color:#2563eb}.legend .bot{color:#6b7280}.legend .preview{color:#b45309}
progress{width:100%;height:1.5em}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(18em,1fr));gap:1em}
.bubble{margin:0;max-width:22em;background:#e7f6dc;border-radius:10px;padding:.4em;align-self:start}
.bubble img{display:block;width:100%;max-height:12em;object-fit:cover;border-radius:6px}
.bubble-text{display:flex;flex-direction:column;gap:.15em;padding:.4em;background:#fff;border-radius:6px;margin-top:.3em;overflow-wrap:anywhere}
.bubble-text small{color:#555}
table.changes{background:none;min-width:18em}
table.changes th,table.changes td{padding:.15em .4em;font-size:.9em;overflow-wrap:anywhere}
pre.value,pre.changes{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.9em}
ul.diff{margin:0;padding-left:1em}
.diff .added{color:#15803d}.diff .removed{color:#b91c1c}
td.arm{overflow-wrap:anywhere;min-width:12em}
.state-live{color:#15803d}.state-expired{color:#92400e}.state-revoked{color:#b91c1c}
@media (max-width:40em){header form{margin-left:0}main{padding:.5em}th,td{padding:.3em}}
"#;

/// The copy button, the card page's live card and the composer's live counter: the only script,
/// and optional (the URL is selectable text anyway; the card page and the composer have a
/// "Preview" button). The counter is the server's (`/console/compose/count`), so the numbers
/// are those of the Rust code that composes, never a second implementation in script.
const JS: &str = r#"
document.querySelectorAll('button[data-copy]').forEach(function (button) {
  button.hidden = false;
  button.addEventListener('click', function () {
    var text = document.getElementById(button.dataset.copy).textContent.trim();
    navigator.clipboard.writeText(text).then(function () {
      button.textContent = 'Copied';
    }, function () {
      button.textContent = 'Copy failed: select the text';
    });
  });
});
document.querySelectorAll('[data-card-field]').forEach(function (field) {
  var shown = document.getElementById('card-' + field.name);
  if (!shown) return;
  field.addEventListener('input', function () {
    var value = field.value.trim();
    if (field.name === 'image') {
      shown.hidden = value.indexOf('https://') !== 0;
      if (!shown.hidden) shown.src = value;
    } else {
      shown.textContent = value;
    }
  });
});
var composer = document.getElementById('composer');
if (composer) {
  var counter = document.getElementById('compose-counter');
  var pending = null;
  var asked = 0;
  var count = function () {
    var ask = ++asked;
    fetch('/console/compose/count', {
      method: 'POST',
      credentials: 'same-origin',
      body: new URLSearchParams(new FormData(composer))
    }).then(function (answer) { return answer.json(); }).then(function (answer) {
      // Only the latest question's answer is shown.
      if (ask === asked) counter.textContent = answer.text;
    });
  };
  composer.addEventListener('input', function () {
    clearTimeout(pending);
    pending = setTimeout(count, 120);
  });
}
"#;

pub async fn css() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
}

pub async fn js() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        JS,
    )
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · shortlink" }
            link rel="stylesheet" href="/console/assets/console.css";
            script src="/console/assets/console.js" defer {}
        }
    }
}

/// A page without navigation: sign-in and errors.
pub fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body { main { (body) } }
        }
    }
}

/// A signed-in page: navigation (creation pages only for roles that may issue) and sign-out.
pub fn page(operator: &Operator, title: &str, body: Markup) -> Markup {
    let nav = html! {
        a href="/console/" { "Overview" }
        " "
        @if operator.may_issue() {
            a href="/console/create" { "Create" } " "
            a href="/console/bulk" { "Bulk upload" } " "
            a href="/console/compose" { "Compose" } " "
        }
        a href="/console/links" { "Links" } " "
        a href="/console/campaigns" { "Campaigns" } " "
        a href="/console/domains" { "Domains" }
        @if operator.role == crate::storage::Role::Admin {
            " " a href="/console/not-found" { "Not-found redirects" }
            " " a href="/console/webhooks" { "Webhooks" }
            " " a href="/console/import" { "Import" }
            " " a href="/console/audit" { "Audit log" }
            " " a href="/console/privacy" { "Privacy" }
            " " a href="/console/workspace" { "Workspace" }
        }
    };
    let who = html! {
        (operator.name) " (" (operator.role.as_str()) ", workspace "
        (operator.workspace_slug) ") "
    };
    let here = Place::Workspace {
        id: operator.workspace,
        slug: operator.workspace_slug.clone(),
    };
    shell(
        title,
        nav,
        who,
        &operator.csrf,
        &operator.places,
        &here,
        body,
    )
}

/// A page of an operator session: the workspaces, every domain's health and the audit log,
/// nothing of a workspace's.
pub fn operator_page(operator: &InstanceOperator, title: &str, body: Markup) -> Markup {
    let nav = html! {
        a href="/console/workspaces" { "Workspaces" } " "
        a href="/console/domains" { "Domains" } " "
        a href="/console/audit" { "Audit log" }
    };
    let who = html! { (operator.key.name) " (operator) " };
    let here = Place::Installation;
    shell(
        title,
        nav,
        who,
        &operator.csrf,
        &operator.places,
        &here,
        body,
    )
}

/// The header every signed-in page shares: navigation, who is signed in where, the switcher
/// when the session holds more than one key, "Add a workspace", and sign-out.
fn shell(
    title: &str,
    nav: Markup,
    who: Markup,
    csrf: &str,
    places: &[Place],
    here: &Place,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header {
                    nav aria-label="Console" { (nav) }
                    @if places.len() > 1 {
                        form.switcher method="post" action="/console/switch" {
                            input type="hidden" name="csrf" value=(csrf);
                            label for="switch-to" { "Acting in" }
                            select #switch-to name="to" {
                                @for place in places {
                                    option value=(place.choice()) selected[place == here] {
                                        (place.label())
                                    }
                                }
                            }
                            button.link type="submit" { "Switch" }
                        }
                    }
                    form.sign-out method="post" action="/console/sign-out" {
                        input type="hidden" name="csrf" value=(csrf);
                        span { (who) }
                        a href="/console/sign-in" { "Add a workspace" } " "
                        button.link type="submit" { "Sign out" }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The hidden CSRF field every form carries.
/// A page about work still under way (a bulk upload, an import, a campaign being counted): it
/// reloads itself every second until `finished`.
pub fn progress_page(operator: &Operator, title: &str, body: Markup, finished: bool) -> Response {
    let mut response = page(operator, title, body).into_response();
    if !finished {
        response
            .headers_mut()
            .insert(REFRESH, HeaderValue::from_static("1"));
    }
    response
}

pub fn csrf(operator: &Operator) -> Markup {
    html! { input type="hidden" name="csrf" value=(operator.csrf); }
}

/// A timestamp for people: UTC, to the minute.
pub fn when(at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    at.map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "—".into())
}
