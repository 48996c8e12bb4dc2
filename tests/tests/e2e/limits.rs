//! Every limit of `shortlink_wire::limits` at its maximum, through every path a click or a read
//! can take (issue 49): the module, nginx's fallback with Redis stopped, the API server's resolve,
//! a rule's and a split's targets, the "not yet" and expired targets, a password, a preview card,
//! export and import, the click webhook, the visit feed and the console, on SQLite and
//! PostgreSQL; and every shipped nginx file sized for the longest answer. The sizes come from
//! `limits`, so raising one there makes this walk use it, and fail until every path carries it.

use serde_json::{json, Value};
use shortlink_e2e::{paths, status_and_location, System, API_KEY};
use shortlink_wire::limits;
use std::time::Duration;
use testkit::wait_until;

const CAMPAIGN: &str = "limits";
/// Clicks reach a webhook receiver on loopback, soon.
const SIDECAR_FLAGS: [&str; 3] = ["--webhook-allow-private", "--webhook-poll", "50ms"];
const FETCHER: &str = "WhatsApp/2.23.20.0 A";

/// An https target of exactly `len` bytes, told apart by `tag`.
fn target(tag: &str, len: usize) -> String {
    let head = format!("https://shop.example/{tag}?pad=");
    format!("{head}{}", "x".repeat(len - head.len()))
}

/// The longest query string nginx takes after `path` in a request line: the line
/// `GET <path>?<query> HTTP/1.1` and its CRLF fill `limits::REQUEST_LINE_BYTES`.
fn longest_query(path: &str) -> String {
    longest_query_from(path, "q=")
}

/// [`longest_query`] starting with `start`.
fn longest_query_from(path: &str, start: &str) -> String {
    let around = "GET ".len() + path.len() + "?".len() + " HTTP/1.1\r\n".len();
    let padding = limits::REQUEST_LINE_BYTES - around - start.len();
    format!("{start}{}", "y".repeat(padding))
}

/// A link's answer as a client sees it, page bodies included (a card, a password page).
#[derive(PartialEq)]
struct Answer {
    status: u16,
    location: String,
    body: String,
}

/// Targets of kilobytes: a failed comparison shows their sizes and ends, not their bytes.
impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |text: &str| {
            let from = text.char_indices().rev().nth(23).map_or(0, |(at, _)| at);
            text[from..].to_owned()
        };
        write!(
            f,
            "{} location {} bytes ..{:?}, body {} bytes ..{:?}",
            self.status,
            self.location.len(),
            tail(&self.location),
            self.body.len(),
            tail(&self.body)
        )
    }
}

fn answer(response: reqwest::blocking::Response) -> Answer {
    let (status, location) = status_and_location(&response);
    // A redirect's body is nginx's boilerplate, or none from the fallback: only pages compare.
    let body = match status {
        301..=308 => String::new(),
        _ => response.text().unwrap_or_default(),
    };
    Answer {
        status,
        location,
        body,
    }
}

/// The links of the walk, each holding one limit at its maximum.
struct Links {
    /// The longest target the sidecar takes (`--max-url-length`).
    max: usize,
    /// An alias of the longest code, the longest target, forwarding the longest query, and a
    /// card whose every field is as long as allowed.
    long: String,
    long_target: String,
    /// A record of the largest size: a short target and three rule and split targets of the
    /// longest size, the target as long as the record allows.
    ruled: String,
    rule_targets: [String; 3],
    not_yet: String,
    not_yet_target: String,
    expiring: String,
    expired_target: String,
    password: String,
}

fn card() -> Value {
    // Two-byte characters: the limits are bytes, not characters.
    json!({
        "title": "é".repeat(limits::CARD_TITLE_BYTES / 2),
        "description": "d".repeat(limits::CARD_DESCRIPTION_BYTES),
        "image": target("image", limits::CARD_IMAGE_BYTES),
        "site_name": "s".repeat(limits::CARD_SITE_NAME_BYTES),
    })
}

fn ruled_body(url_len: usize, rule_targets: &[String; 3]) -> Value {
    json!({
        "url": target("ruled", url_len),
        "campaign": CAMPAIGN,
        "rules": [
            {"if": {"query": [{"name": "rule"}]},
             "then": {"url": rule_targets[0], "forward_query": true}},
            {"if": {}, "split": {"sticky": true, "variants": [
                {"weight": 1, "url": rule_targets[1]},
                {"weight": 1, "url": rule_targets[2]}]}},
        ],
    })
}

/// Creates the walk's links, each refused one byte past its limit.
fn create_links(system: &System, max: usize) -> Links {
    let api = system.api();
    let long = format!("{:a<width$}", "longest-", width = limits::CODE_BYTES);
    let long_target = target("long", max);
    let created = system.create(json!({
        "code": long, "url": long_target, "forward_query": true, "campaign": CAMPAIGN,
        "preview": card(),
    }));
    assert_eq!(created, long);
    let (status, refused) = api.post("/links", &json!({"url": target("long", max + 1)}));
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (422, Some("url_too_long"))
    );
    let mut too_long_title = card();
    too_long_title["title"] = json!(format!("{}a", "é".repeat(limits::CARD_TITLE_BYTES / 2)));
    let (status, _) = api.post(
        "/links",
        &json!({"url": long_target, "preview": too_long_title}),
    );
    assert_eq!(status, 422, "a title one byte too long");

    // The record's limit: the longest own target that still fits beside three of the longest
    // rule targets, found by halving; one byte more is refused by name.
    // Three rule targets as long as allowed that a record still holds beside a short target.
    let rule_len = max.min((limits::RECORD_BYTES - 200) / 3);
    let rule_targets = ["rule", "split-a", "split-b"].map(|tag| target(tag, rule_len));
    let fits = |len: usize| {
        let (status, body) = api.post("/links", &ruled_body(len, &rule_targets));
        match status {
            201 => Some(body["code"].as_str().unwrap().to_owned()),
            422 if body["error"]["code"] == "record_too_large" => None,
            _ => panic!("a ruled link of {len}: {status} {body}"),
        }
    };
    let (mut fitting, mut over) = (40, max + 1);
    let mut ruled = fits(fitting).expect("a short target fits");
    assert!(
        fits(max).is_none(),
        "three rule targets and a target fit in a record"
    );
    while over - fitting > 1 {
        let middle = (fitting + over) / 2;
        match fits(middle) {
            Some(code) => (fitting, ruled) = (middle, code),
            None => over = middle,
        }
    }

    let not_yet_target = target("not-yet", max);
    let opens = chrono::Utc::now() + chrono::Duration::hours(1);
    let not_yet = system.create(json!({
        "url": target("opened", 100), "valid_since": opens.to_rfc3339(),
        "not_yet_url": not_yet_target, "campaign": CAMPAIGN,
    }));
    let expired_target = target("expired", max);
    let ends = chrono::Utc::now() + chrono::Duration::seconds(3);
    let expiring = system.create(json!({
        "url": target("before-expiry", 100), "expires_at": ends.to_rfc3339(),
        "expired_url": expired_target, "campaign": CAMPAIGN,
    }));
    let password = system.create(json!({
        "url": target("protected", max), "password": "p".repeat(limits::PASSWORD_BYTES),
        "campaign": CAMPAIGN,
    }));
    Links {
        max,
        long,
        long_target,
        ruled,
        rule_targets,
        not_yet,
        not_yet_target,
        expiring,
        expired_target,
        password,
    }
}

/// What a click on each link answers, through nginx's public server: the module's answers, or
/// the fallback's when Redis is stopped. Sticky split variants by client address: the
/// addresses that reach each variant are found once, with the module, and reused.
struct Clicks<'a> {
    system: &'a System,
    links: &'a Links,
}

impl Clicks<'_> {
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        answer(self.system.nginx.get_with("s1.test", path, headers))
    }

    fn all(&self, split_clients: &[String]) -> Vec<Answer> {
        let links = self.links;
        let long = format!("/{}", links.long);
        let ruled = format!("/{}", links.ruled);
        let mut answers = vec![
            self.get(&format!("{long}?{}", longest_query(&long)), &[]),
            self.get(&long, &[("User-Agent", FETCHER)]),
            self.get(
                &format!("{ruled}?{}", longest_query_from(&ruled, "rule&")),
                &[],
            ),
            self.get(&format!("/{}", links.not_yet), &[]),
            self.get(&format!("/{}", links.expiring), &[]),
        ];
        for client in split_clients {
            answers.push(self.get(&ruled, &[("X-Forwarded-For", client)]));
        }
        answers
    }

    /// Client addresses that the sticky split sends to each of its two variants.
    fn split_clients(&self) -> Vec<String> {
        let ruled = format!("/{}", self.links.ruled);
        let mut found: [Option<String>; 2] = [None, None];
        for n in 1..=200 {
            let client = format!("198.51.100.{n}");
            let location = self.get(&ruled, &[("X-Forwarded-For", &client)]).location;
            let variant = (1..3).find(|&i| location == self.links.rule_targets[i]);
            let variant = variant.unwrap_or_else(|| panic!("the split answered {location}"));
            found[variant - 1].get_or_insert(client);
            if found.iter().all(Option::is_some) {
                return found.into_iter().flatten().collect();
            }
        }
        panic!("200 clients reached one variant only");
    }
}

/// The answers the module must give, from the links alone.
fn check_module_answers(links: &Links, answers: &[Answer]) {
    let long = format!("/{}", links.long);
    let ruled = format!("/{}", links.ruled);
    let redirect = |location: String| (302, location);
    let got = |i: usize| (answers[i].status, answers[i].location.clone());
    assert_eq!(
        got(0),
        redirect(format!("{}&{}", links.long_target, longest_query(&long)))
    );
    let page = &answers[1];
    assert_eq!(page.status, 200, "the card page");
    for field in ["title", "description", "image", "site_name"] {
        let value = card()[field].as_str().unwrap().to_owned();
        assert!(
            page.body.contains(&value),
            "the card page lacks its whole {field}"
        );
    }
    assert_eq!(
        got(2),
        redirect(format!(
            "{}&{}",
            links.rule_targets[0],
            longest_query_from(&ruled, "rule&")
        ))
    );
    assert_eq!(got(3), redirect(links.not_yet_target.clone()));
    assert_eq!(got(4), redirect(links.expired_target.clone()));
    assert_eq!(got(5), redirect(links.rule_targets[1].clone()));
    assert_eq!(got(6), redirect(links.rule_targets[2].clone()));
}

/// The request line one byte past nginx's: answered 414 by nginx itself, before any module.
fn check_request_line_limit(system: &System, links: &Links) {
    let long = format!("/{}", links.long);
    let over = format!("{long}?{}y", longest_query(&long));
    assert_eq!(system.nginx.get("s1.test", &over).status(), 414);
}

/// The password page, then the longest password through the module's form reader.
fn check_password(system: &System, links: &Links) {
    let path = format!("/{}", links.password);
    assert_eq!(system.nginx.get("s1.test", &path).status(), 401);
    let response = shortlink_e2e::http_client()
        .post(format!(
            "http://127.0.0.1:{}{path}",
            system.nginx.redirect_port
        ))
        .header("Host", "s1.test")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("password={}", "p".repeat(limits::PASSWORD_BYTES)))
        .send()
        .expect("post the password");
    let (status, location) = status_and_location(&response);
    assert_eq!(status, 303);
    assert_eq!(location, target("protected", links.max));
}

/// A single API call's body, and a batch's line, of the largest size; one byte more refused.
fn check_bodies(system: &System, max: usize) {
    let padded = |len: usize| {
        let item = json!({"url": target("body", max), "campaign": CAMPAIGN});
        let text = item.to_string();
        let (head, _) = text.split_at(text.len() - 1);
        format!("{head}{}}}", " ".repeat(len - text.len()))
    };
    let client = shortlink_e2e::http_client();
    let post = |body: String| {
        let response = client
            .post(format!(
                "http://127.0.0.1:{}/api/v1/links",
                system.nginx.api_port
            ))
            .bearer_auth(API_KEY)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .expect("reach the API server");
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap_or(Value::Null))
    };
    let (status, created) = post(padded(limits::REQUEST_BODY_BYTES));
    assert_eq!(status, 201, "{created}");
    let (status, refused) = post(padded(limits::REQUEST_BODY_BYTES + 1));
    assert_eq!(status, 413);
    assert_eq!(refused["error"]["code"], "payload_too_large");

    let lines = format!(
        "{}\n{}\n",
        padded(limits::REQUEST_BODY_BYTES),
        padded(limits::REQUEST_BODY_BYTES + 1)
    );
    let (status, results) = system.api().post_ndjson("/links/batch", lines);
    assert_eq!(status, 200);
    assert_eq!(results[0]["status"], 201, "{}", results[0]);
    assert_eq!(results[1]["error"]["code"], "item_too_large");
    for link in [&created, &results[0]["link"]] {
        let code = link["code"].as_str().unwrap();
        let location = status_and_location(&system.nginx.get("s1.test", &format!("/{code}")));
        assert_eq!(location, (302, target("body", max)));
    }
}

/// The API server's own resolve (what schemathesis calls), with the longest query it can carry.
/// The API server names no host's workspace (a caller's `Host` must not pick one): the caller,
/// holding nginx's key, says it as the fallback does.
fn check_api_resolve(system: &System, links: &Links) {
    let path = format!("/api/v1/resolve/{}", links.long);
    let query = longest_query(&path);
    let response = shortlink_e2e::http_client()
        .get(format!(
            "http://127.0.0.1:{}{path}?{query}",
            system.nginx.api_port
        ))
        .bearer_auth(&system.resolve_key)
        .header(
            shortlink_wire::fallback::WORKSPACE_HEADER,
            shortlink_wire::fallback::header_value("default"),
        )
        .send()
        .expect("reach the API server");
    assert_eq!(
        status_and_location(&response),
        (302, format!("{}&{query}", links.long_target))
    );
}

/// Reads through the API: every long value comes back whole.
fn check_reads(system: &System, links: &Links) {
    let (status, long) = system.api().get(&format!("/links/{}", links.long));
    assert_eq!(status, 200);
    assert_eq!(long["url"], links.long_target.as_str());
    assert_eq!(long["preview"], card());
    let (_, ruled) = system.api().get(&format!("/links/{}", links.ruled));
    let text = ruled.to_string();
    assert!(links.rule_targets.iter().all(|t| text.contains(t.as_str())));
}

/// The console's page of the long link, and the rules page of the largest record, show their
/// targets whole.
fn check_console(system: &System, links: &Links) {
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);
    let client = shortlink_e2e::http_client();
    let cookie = |response: &reqwest::blocking::Response, name: &str| {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(|value| value.strip_prefix(&format!("{name}=")))
            .and_then(|rest| rest.split(';').next())
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {name} cookie"))
    };
    let page = client.get(format!("{console}/sign-in")).send().unwrap();
    let csrf = cookie(&page, "shortlink_console_signin");
    let signed_in = client
        .post(format!("{console}/sign-in"))
        .header("Cookie", format!("shortlink_console_signin={csrf}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        // Both are URL-safe tokens: no encoding needed.
        .body(format!("key={API_KEY}&csrf={csrf}"))
        .send()
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let session = cookie(&signed_in, "shortlink_console");
    let page = |code: &str| {
        let response = client
            .get(format!("{console}/links/{code}"))
            .header("Cookie", format!("shortlink_console={session}"))
            .send()
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().unwrap()
    };
    assert!(page(&links.long).contains(&links.long_target));
    let ruled = page(&format!("{}/rules", links.ruled));
    for target in &links.rule_targets {
        assert!(
            ruled.contains(target.as_str()),
            "the console lost a rule target"
        );
    }
}

/// Every target the module answered with, as a visit's `target` names it.
fn answered_targets(links: &Links) -> Vec<&str> {
    let mut targets = vec![
        links.long_target.as_str(),
        &links.not_yet_target,
        &links.expired_target,
    ];
    targets.extend(links.rule_targets.iter().map(String::as_str));
    targets
}

/// Whether `events` (of the feed or a webhook) name every answered target whole.
fn carry_every_target(events: &[Value], links: &Links) -> bool {
    answered_targets(links)
        .iter()
        .all(|target| events.iter().any(|event| event["target"] == *target))
}

/// The visit feed's events carry the targets their clicks went to, whole.
fn check_feed(system: &System, links: &Links) {
    let client = shortlink_e2e::http_client();
    let feed = || {
        let response = client
            .get(format!(
                "http://127.0.0.1:{}/api/v1/visits?campaign={CAMPAIGN}&limit=10000",
                system.nginx.api_port
            ))
            .bearer_auth(API_KEY)
            .send()
            .expect("reach the API server");
        assert_eq!(response.status(), 200);
        let text = response.text().unwrap();
        let events: Vec<Value> = (text.lines())
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        events
    };
    let fed = wait_until(Duration::from_secs(30), || {
        carry_every_target(&feed(), links)
    });
    assert!(fed, "the feed never named every long target whole");
}

/// Exported from `system`, imported into a fresh system on `fresh`: the long links answer there
/// as they did here.
fn check_export_import(system: &System, links: &Links, fresh: System, answers: &[Answer]) {
    let file = system.dir.path().join("export.ndjson");
    let output = system.sidecar_cli(&["export", "--output", file.to_str().unwrap()]);
    assert!(output.status.success(), "export: {output:?}");
    let max = links.max.to_string();
    let output = fresh.sidecar_cli(&["import", "--max-url-length", &max, file.to_str().unwrap()]);
    assert!(output.status.success(), "import: {output:?}");
    let clicks = Clicks {
        system: &fresh,
        links,
    };
    let imported = clicks.all(&[]);
    // The expiring link has expired on both; the split's clients are checked on the original.
    assert_eq!(imported[..5], answers[..5]);
}

/// The walk on `system`, whose sidecar takes targets of up to `max` bytes; `fresh` (a system on a
/// new database, as long a `max`) receives its export.
fn walk(system: System, fresh: System, max: usize) {
    let (url, delivered) = shortlink_e2e::receiver::events();
    let (status, subscription) = system.api().post(
        "/webhooks",
        &json!({"url": url, "secret": "limits-webhook-secret-0123456789",
                "campaigns": [CAMPAIGN], "batch_size": 20, "batch_ms": 10,
                // The walk's clicks send no User-Agent: bots, to the classifier.
                "include_bots": true}),
    );
    assert_eq!(status, 201, "{subscription}");
    let links = create_links(&system, max);
    let clicks = Clicks {
        system: &system,
        links: &links,
    };
    let expired = wait_until(Duration::from_secs(20), || {
        clicks.get(&format!("/{}", links.expiring), &[]).location == links.expired_target
    });
    assert!(expired, "the expiring link never expired");
    let split_clients = clicks.split_clients();
    let from_module = clicks.all(&split_clients);
    check_module_answers(&links, &from_module);
    check_request_line_limit(&system, &links);
    check_password(&system, &links);
    check_bodies(&system, max);
    check_api_resolve(&system, &links);
    check_reads(&system, &links);
    check_console(&system, &links);
    check_feed(&system, &links);
    let hooked = wait_until(Duration::from_secs(30), || {
        carry_every_target(&delivered.lock().unwrap(), &links)
    });
    assert!(
        hooked,
        "the click webhook never carried the long targets whole: {} events, sidecar log:\n{}",
        delivered.lock().unwrap().len(),
        system.sidecar.process.log_text()
    );
    check_export_import(&system, &links, fresh, &from_module);

    let mut system = system;
    let before = system.nginx.counters()["fallbacks"];
    system.redis.stop();
    let clicks = Clicks {
        system: &system,
        links: &links,
    };
    let from_fallback = clicks.all(&split_clients);
    assert!(system.nginx.counters()["fallbacks"] > before);
    assert_eq!(
        from_fallback, from_module,
        "the fallback answers as the module"
    );
    check_api_resolve(&system, &links);
}

/// SQLite with targets raised to the most `--max-url-length` allows.
#[test]
fn every_limit_holds_on_every_path_on_sqlite() {
    let ceiling = limits::TARGET_BYTES_CEILING.to_string();
    let mut flags = SIDECAR_FLAGS.to_vec();
    flags.extend(["--max-url-length", &ceiling]);
    let system = System::start_on_with(testkit::RedisServer::start(), Default::default(), &flags);
    walk(system, System::start(), limits::TARGET_BYTES_CEILING);
}

/// PostgreSQL with the default target limit.
#[test]
fn every_limit_holds_on_every_path_on_postgresql() {
    let postgres = testkit::postgres();
    let system = System::start_on_database_with(&postgres.fresh_database_url(), &SIDECAR_FLAGS);
    let fresh = System::start_on_database(&postgres.fresh_database_url());
    walk(system, fresh, limits::TARGET_BYTES);
}

/// Every shipped nginx file that proxies to the sidecar gives the answer's header the room the
/// limits need: scripts/run's templates, the imported-domain server, the Debian package's site
/// and redirect locations. The walk above runs the templates for real; the Debian files run in
/// scripts/test-debian-packages.
#[test]
fn every_shipped_proxy_to_the_sidecar_has_room_for_the_longest_answer() {
    let root = paths::workspace_dir();
    for file in paths::SHIPPED_NGINX_FILES {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let mut proxies = Vec::new();
        buffer_sizes(&parse_blocks(&text), None, &mut proxies);
        assert!(
            !proxies.is_empty(),
            "{file} no longer proxies to the sidecar"
        );
        for (head, size) in proxies {
            let size = size.unwrap_or_else(|| panic!("{file}: {head} has no proxy_buffer_size"));
            assert!(
                size >= limits::ANSWER_HEADER_BYTES,
                "{file}: {head}: proxy_buffer_size {size} < {} bytes",
                limits::ANSWER_HEADER_BYTES
            );
        }
    }
}

/// A block of nginx configuration: its head (`server`, `location @resolve`), its own statements
/// one a line (nested blocks and comments left out), and its nested blocks.
#[derive(Default)]
struct Block {
    head: String,
    own: String,
    children: Vec<Block>,
}

fn parse_blocks(text: &str) -> Block {
    let mut stack = vec![Block::default()];
    let mut statement = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                chars.by_ref().find(|&c| c == '\n');
            }
            // Quoted strings hold braces and semicolons of their own (`return 413 '{...}'`).
            '\'' | '"' => {
                statement.push(c);
                while let Some(inner) = chars.next() {
                    statement.push(inner);
                    if inner == '\\' {
                        statement.extend(chars.next());
                    } else if inner == c {
                        break;
                    }
                }
            }
            ';' => {
                let top = stack.last_mut().expect("a block is open");
                top.own.push_str(statement.trim());
                top.own.push_str(";\n");
                statement.clear();
            }
            '{' => {
                let head = std::mem::take(&mut statement).trim().to_owned();
                stack.push(Block {
                    head,
                    ..Block::default()
                });
            }
            '}' => {
                let done = stack.pop().expect("balanced braces");
                stack
                    .last_mut()
                    .expect("balanced braces")
                    .children
                    .push(done);
                statement.clear();
            }
            _ => statement.push(c),
        }
    }
    stack.pop().expect("balanced braces")
}

/// Each block that proxies to the sidecar, with the `proxy_buffer_size` in force there (its own,
/// else its nearest enclosing block's, as nginx inherits it).
fn buffer_sizes(block: &Block, inherited: Option<usize>, out: &mut Vec<(String, Option<usize>)>) {
    let size = directive_size(&block.own, "proxy_buffer_size").or(inherited);
    if block.own.contains("proxy_pass http://shortlink_sidecar") {
        out.push((block.head.clone(), size));
    }
    for child in &block.children {
        buffer_sizes(child, size, out);
    }
}

/// `name <size>;` among a block's own statements, in bytes.
fn directive_size(statements: &str, name: &str) -> Option<usize> {
    statements.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.trim().strip_suffix(';')?;
        let (digits, unit) = value.split_at(value.trim_end_matches(['k', 'K', 'm', 'M']).len());
        let scale = match unit {
            "" => 1,
            "k" | "K" => 1024,
            _ => 1024 * 1024,
        };
        digits.parse::<usize>().ok().map(|n| n * scale)
    })
}
