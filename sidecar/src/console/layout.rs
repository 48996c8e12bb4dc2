//! The page shell (navigation, sign-out form), the stylesheet and the script, all in the binary.

use super::operator::{InstanceOperator, Operator, Place};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, REFRESH};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

/// One small stylesheet: a single column under 40em, tables as cards, the navigation behind a
/// "Menu" button, so that every page works on a phone. Served from a file of its own.
const CSS: &str = include_str!("assets/console.css");

/// The copy button, the card page's live card, the composer's live counter and the phone's
/// table labels: the only script, and optional (the URL is selectable text anyway; the card
/// page and the composer have a "Preview" button; a table without its labels is still a table).
/// The counter is the server's (`/console/compose/count`), so the numbers are those of the Rust
/// code that composes, never a second implementation in script.
const JS: &str = include_str!("assets/console.js");

/// The console's icon: asked for by every page's head, so that browsers do not ask nginx for
/// `/favicon.ico` (which the internal server refuses, logging an error on every page).
const ICON: &str = include_str!("assets/icon.svg");

pub async fn css() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
}

pub async fn icon() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "image/svg+xml"),
            (CACHE_CONTROL, "public, max-age=86400"),
        ],
        ICON,
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
            link rel="icon" href="/console/assets/icon.svg" type="image/svg+xml";
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
        @if operator.role == shortlink_store::Role::Admin {
            " " a href="/console/not-found" { "Not-found redirects" }
            " " a href="/console/webhooks" { "Webhooks" }
            " " a href="/console/import" { "Import" }
            " " a href="/console/audit" { "Audit log" }
            " " a href="/console/held" { "Held back" }
            " " a href="/console/privacy" { "Privacy" }
            " " a href="/console/workspace" { "Workspace" }
        }
    };
    let who = html! {
        (operator.name) " (" (operator.role.as_str()) ", " (operator.workspace_name) ") "
    };
    let here = Place::Workspace {
        id: operator.workspace,
        slug: operator.workspace_slug.clone(),
        name: operator.workspace_name.clone(),
    };
    let (csrf, places) = (&operator.csrf, &operator.places);
    shell(title, nav, who, csrf, places, &here, body)
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
    let (csrf, places) = (&operator.csrf, &operator.places);
    shell(title, nav, who, csrf, places, &Place::Installation, body)
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
                    a.brand href="/console/" { "shortlink" }
                    input #menu.menu-toggle type="checkbox" aria-label="Menu";
                    label.menu-button for="menu" aria-hidden="true" { "Menu" }
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

/// The hidden CSRF field every form carries.
pub fn csrf(operator: &Operator) -> Markup {
    html! { input type="hidden" name="csrf" value=(operator.csrf); }
}

/// A timestamp for people: UTC, to the minute.
pub fn when(at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    at.map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "—".into())
}
