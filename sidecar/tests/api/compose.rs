//! `POST /compose` (issue 37): per-recipient messages with their links, each option, budgets,
//! bad phones per line, hostile templates refused with nothing issued, idempotent retries, CSV
//! and NDJSON both ways.

use crate::helpers::*;
use crate::on_each_backend;
use serde_json::{json, Value};

on_each_backend!(an_interrupted_compose_retried_gives_the_same_codes);

const TEMPLATE: &str = "Hi {{name}}, 20% off today: {{link}} Reply STOP to end";

/// `POST /compose` with `query`, NDJSON recipients, an NDJSON answer; panics unless 200.
async fn compose(app: &TestApp, query: &[(&str, &str)], recipients: &[Value]) -> Vec<Value> {
    let body = ndjson(recipients);
    let response = send(app, query, "application/x-ndjson", None, body).await;
    assert_eq!(response.status(), 200);
    lines(response).await
}

/// An NDJSON answer's lines.
async fn lines(response: reqwest::Response) -> Vec<Value> {
    let text = response.text().await.unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {text}")))
        .collect()
}

async fn send(
    app: &TestApp,
    query: &[(&str, &str)],
    content_type: &str,
    key: Option<&str>,
    body: Vec<u8>,
) -> reqwest::Response {
    let mut request = post_compose(app, query)
        .header("content-type", content_type)
        .body(body);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.send().await.unwrap()
}

/// `POST /compose?query` (reqwest here is built without its `query` feature).
fn post_compose(app: &TestApp, query: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs(query);
    app.client.post(url).bearer_auth(API_KEY)
}

fn ndjson(recipients: &[Value]) -> Vec<u8> {
    recipients
        .iter()
        .map(|r| format!("{r}\n"))
        .collect::<String>()
        .into_bytes()
}

fn ann(phone: &str) -> Value {
    json!({"phone": phone, "ref": "c-1", "variables": {"name": "Ann"}, "url": "https://shop.example/sale"})
}

#[tokio::test]
async fn each_recipient_gets_its_link_and_message() {
    let app = spawn_app(Backend::Sqlite).await;
    let lines = compose(
        &app,
        &[
            ("template", TEMPLATE),
            ("country", "FR"),
            ("campaign", "spring"),
        ],
        &[ann("06 12 34 56 78"), ann("+44 7400 123456")],
    )
    .await;
    assert_eq!(lines.len(), 3, "two recipients and the summary");
    for line in &lines[..2] {
        assert_eq!(line["status"], 201);
        let code = line["code"].as_str().unwrap();
        let short_url = format!("{PUBLIC_BASE}/{code}");
        assert_eq!(line["short_url"], short_url);
        let text = format!("Hi Ann, 20% off today: {short_url} Reply STOP to end");
        assert_eq!(line["text"], text);
        assert_eq!(line["characters"], text.chars().count());
        assert_eq!(
            (line["encoding"].as_str(), line["segments"].as_u64()),
            (Some("GSM-7"), Some(1))
        );
        assert_eq!(line["over_budget"], false);
        // Issued as the batch issues: stored, in Redis, with the campaign and the ref.
        let link: Value = app.get_link(code).await.json().await.unwrap();
        assert_eq!(
            (link["url"].as_str(), link["campaign"].as_str()),
            (Some("https://shop.example/sale"), Some("spring"))
        );
        assert_eq!(link["ref"], "c-1");
        assert!(app.redis_record(code).await.is_some());
    }
    assert_eq!(lines[0]["phone"], "+33612345678");
    assert_eq!(lines[1]["phone"], "+447400123456");
    let summary = &lines[2]["summary"];
    assert_eq!(summary["recipients"], 2);
    assert_eq!(summary["segments"], 2);
    assert_eq!(summary["by_segments"], json!({"1": 2}));
    assert_eq!(summary["encodings"], json!({"GSM-7": 2}));
    assert_eq!(app.stored().await.links, 2);
}

#[tokio::test]
async fn bad_phones_and_bad_lines_are_reported_per_line() {
    let app = spawn_app(Backend::Sqlite).await;
    let recipients = [
        ann("06 12 34 56 78"),
        ann("06 12 34"),
        ann("0612345678")
            .as_object()
            .cloned()
            .map(|mut r| {
                r.insert("variables".into(), json!({}));
                Value::Object(r)
            })
            .unwrap(),
        json!({"phone": "+33612345678", "variables": {"name": "Bo"}}),
        json!({"phone": "+33612345678", "variables": {"name": "Bo"}, "url": "javascript:alert(1)"}),
        json!({"phone": "+33612345678", "colour": "red"}),
        json!("not an object"),
    ];
    let lines = compose(
        &app,
        &[("template", TEMPLATE), ("country", "fr")],
        &recipients,
    )
    .await;
    let codes: Vec<(u64, &str)> = lines[..7]
        .iter()
        .map(|l| {
            (
                l["status"].as_u64().unwrap(),
                l["error"]["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            (201, ""),
            (422, "invalid_phone"),
            (422, "invalid_variables"),
            (422, "missing_url"),
            (422, "unsupported_scheme"),
            (422, "invalid_body"),
            (422, "invalid_body"),
        ]
    );
    // A refused recipient after its number was read still says who it is.
    assert_eq!(lines[4]["phone"], "+33612345678");
    assert_eq!(lines[7]["summary"]["failed"], 6);
    assert_eq!(app.stored().await.links, 1);
}

#[tokio::test]
async fn hostile_templates_are_refused_and_nothing_is_issued() {
    let app = spawn_app(Backend::Sqlite).await;
    let enormous = format!("{} {{{{link}}}}", "a".repeat(1_600));
    let cases = [
        ("Hi {{name, {{link}}", "invalid_template"),
        ("Hi name}} {{link}}", "invalid_template"),
        ("Hi {{nmae}} {{link}}", "invalid_template"),
        ("Hi {{name}}, no link", "invalid_template"),
        (enormous.as_str(), "invalid_template"),
        (&"{{link}}".repeat(101), "invalid_template"),
    ];
    for (template, code) in cases {
        let response = send(
            &app,
            &[("template", template), ("country", "FR")],
            "application/x-ndjson",
            Some("hostile"),
            ndjson(&[ann("0612345678")]),
        )
        .await;
        assert_eq!(response.status(), 422, "{template}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{template}: {body}");
    }
    for (query, code) in [
        (("budget", "0"), "invalid_budget"),
        (("languages", "klingon"), "invalid_language"),
        (("country", "XX"), "invalid_country"),
        (
            ("url_template", "https://t.example/{{link}}"),
            "invalid_url_template",
        ),
    ] {
        let response = send(
            &app,
            &[("template", TEMPLATE), query],
            "application/x-ndjson",
            None,
            ndjson(&[ann("+33612345678")]),
        )
        .await;
        assert_eq!(response.status(), 422);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code);
    }
    let response = send(&app, &[], "application/x-ndjson", None, Vec::new()).await;
    assert_eq!(response.status(), 400);
    let response = send(
        &app,
        &[("template", TEMPLATE)],
        "text/plain",
        None,
        Vec::new(),
    )
    .await;
    assert_eq!(response.status(), 415);
    let stored = app.stored().await;
    assert_eq!((stored.links, stored.redis_keys), (0, 0));
    // Not even the idempotency key was claimed: the same key works for a good request.
    let response = send(
        &app,
        &[("template", TEMPLATE), ("country", "FR")],
        "application/x-ndjson",
        Some("hostile"),
        ndjson(&[ann("0612345678")]),
    )
    .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_dry_run_measures_exactly_and_issues_nothing() {
    let app = spawn_app(Backend::Sqlite).await;
    let query = [("template", TEMPLATE), ("country", "FR")];
    let recipients = [
        ann("0612345678"),
        json!({"phone": "0612345678", "variables": {"name": "Zoe €"}, "url": "https://shop.example/x"}),
    ];
    let dry_query = [query[0], query[1], ("dry_run", "true")];
    let dry = compose(&app, &dry_query, &recipients).await;
    assert_eq!(app.stored().await.links, 0);
    assert_eq!(dry[0]["status"], 0);
    assert!(dry[0]["code"].is_null());
    let real = compose(&app, &query, &recipients).await;
    // The stand-in link: the base and a code of x's, as long as a real one.
    let code_len = real[0]["code"].as_str().unwrap().len();
    let stand_in = format!("{PUBLIC_BASE}/{}", "x".repeat(code_len));
    assert_eq!(
        dry[0]["text"],
        format!("Hi Ann, 20% off today: {stand_in} Reply STOP to end")
    );
    for (dry, real) in dry.iter().zip(&real).take(2) {
        for field in ["characters", "units", "segments", "encoding"] {
            assert_eq!(dry[field], real[field], "{field}");
        }
    }
    // `€` is in the extension table: two septets, still GSM-7.
    assert_eq!(real[1]["encoding"], "GSM-7");
    assert_eq!(
        real[1]["units"].as_u64().unwrap(),
        real[1]["characters"].as_u64().unwrap() + 1
    );
    assert_eq!(dry[2]["summary"], real[2]["summary"]);
}

#[tokio::test]
async fn options_shorten_the_message() {
    let app = spawn_app(Backend::Sqlite).await;
    let base = [
        (
            "template",
            "\u{201c}Soldes\u{201d} \u{2014} {{name}} {{link}}",
        ),
        ("country", "FR"),
    ];
    let who = json!({"phone": "0612345678", "variables": {"name": "Ann"}, "url": "https://shop.example/"});
    // Without the options: curly quotes force UCS-2, and they are listed.
    let plain = compose(&app, &base, std::slice::from_ref(&who)).await;
    assert_eq!(plain[0]["encoding"], "UCS-2");
    let forced: Vec<&str> = plain[0]["forced_ucs2"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["char"].as_str().unwrap())
        .collect();
    assert_eq!(forced, ["\u{201c}", "\u{201d}", "\u{2014}"]);
    let summary = plain[1]["summary"]["forced_ucs2"].as_array().unwrap();
    let quote = summary.iter().find(|f| f["char"] == "\u{201c}").unwrap();
    assert_eq!(
        (quote["codepoint"].as_str(), quote["messages"].as_u64()),
        (Some("U+201C"), Some(1))
    );
    assert_eq!(quote["examples"], json!([{"index": 0, "position": 0}]));
    assert_eq!(summary.len(), 3);
    // Look-alikes replaced, and the scheme stripped.
    let shorter = compose(
        &app,
        &[
            base[0],
            base[1],
            ("replace_lookalikes", "true"),
            ("strip_scheme", "true"),
        ],
        std::slice::from_ref(&who),
    )
    .await;
    let code = shorter[0]["code"].as_str().unwrap();
    assert_eq!(
        shorter[0]["text"],
        format!("\"Soldes\" - Ann s.example/{code}")
    );
    assert_eq!(shorter[0]["encoding"], "GSM-7");
    assert_eq!(shorter[0]["replaced"].as_array().unwrap().len(), 3);
    assert_eq!(shorter[1]["summary"]["replaced"], 1);
    // A Turkish message stays GSM-7 with the national tables the gateway supports.
    let turkish = [
        ("template", "Merhaba {{name}}, indirim: {{link}}"),
        ("country", "TR"),
    ];
    let who = json!({"phone": "0532 123 45 67", "variables": {"name": "Şükrü Çağlar"}, "url": "https://shop.example/"});
    let without = compose(&app, &turkish, std::slice::from_ref(&who)).await;
    assert_eq!(without[0]["encoding"], "UCS-2");
    let with = compose(
        &app,
        &[turkish[0], turkish[1], ("languages", "turkish")],
        &[who],
    )
    .await;
    assert!(
        with[0]["encoding"].as_str().unwrap().starts_with("GSM-7"),
        "{}",
        with[0]
    );
    assert_eq!(with[0]["phone"], "+905321234567");
}

#[tokio::test]
async fn the_shortest_issuing_domain_on_request() {
    let app = spawn_app(Backend::Sqlite).await;
    // Weighted towards the long domain; the shortest is draining, so never issued on.
    let bases = "https://a-much-longer-short-domain.example weight=9 https://s.example weight=1 \
                 https://x.io draining";
    let template = [("template", "{{link}}"), ("country", "FR")];
    let who = json!({"phone": "0612345678", "url": "https://shop.example/"});
    let recipients = vec![who; 20];
    let run = |shortest: bool| {
        let mut query = template.to_vec();
        if shortest {
            query.push(("shortest_domain", "true"));
        }
        post_compose(&app, &query)
            .header("X-Shortlink-Public-Base", bases)
            .header("content-type", "application/x-ndjson")
            .body(ndjson(&recipients))
    };
    let hosts = |answer: &[Value]| -> Vec<String> {
        answer[..20]
            .iter()
            .map(|line| {
                let url = url::Url::parse(line["short_url"].as_str().unwrap()).unwrap();
                url.host_str().unwrap().to_owned()
            })
            .collect()
    };
    let spread = lines(run(false).send().await.unwrap()).await;
    assert!(hosts(&spread).iter().any(|host| host != "s.example"));
    let shortest = lines(run(true).send().await.unwrap()).await;
    assert!(hosts(&shortest).iter().all(|host| host == "s.example"));
    for line in &shortest[..20] {
        assert_eq!(line["text"], line["short_url"]);
    }
    // A dry run measures with the base the links will get: the shortest, exactly.
    let mut query = template.to_vec();
    query.extend([("shortest_domain", "true"), ("dry_run", "true")]);
    let dry = post_compose(&app, &query)
        .header("X-Shortlink-Public-Base", bases)
        .header("content-type", "application/x-ndjson")
        .body(ndjson(&recipients[..1]))
        .send()
        .await
        .unwrap();
    let dry = lines(dry).await;
    assert_eq!(dry[0]["characters"], shortest[0]["characters"]);
    assert!(dry[0]["text"]
        .as_str()
        .unwrap()
        .starts_with("https://s.example/"));
}

#[tokio::test]
async fn url_templates_and_link_options_per_recipient() {
    let app = spawn_app(Backend::Sqlite).await;
    let query = [
        ("template", "{{link}}"),
        ("url_template", "https://shop.example/c?id={{id}}"),
        ("country", "FR"),
    ];
    let recipients = [
        json!({"phone": "0612345678", "variables": {"id": "a b&c=d"}}),
        json!({"phone": "0612345678", "variables": {"id": "2"}, "link": {"code": "spring-promo", "redirect": 301}}),
        json!({"phone": "0612345678", "variables": {"id": "3"}, "link": {"ref": "stolen"}}),
    ];
    let lines = compose(&app, &query, &recipients).await;
    let first: Value = app
        .get_link(lines[0]["code"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["url"], "https://shop.example/c?id=a%20b%26c%3Dd");
    assert_eq!(lines[1]["code"], "spring-promo");
    let second: Value = app.get_link("spring-promo").await.json().await.unwrap();
    assert_eq!(second["redirect"], 301);
    assert_eq!(lines[2]["error"]["code"], "invalid_body");
}

#[tokio::test]
async fn budgets_report_or_refuse() {
    let app = spawn_app(Backend::Sqlite).await;
    let long = "x".repeat(150);
    let recipients = [
        ann("0612345678"),
        json!({"phone": "0612345678", "variables": {"name": long}, "url": "https://shop.example/"}),
    ];
    let report = compose(
        &app,
        &[("template", TEMPLATE), ("country", "FR"), ("budget", "1")],
        &recipients,
    )
    .await;
    assert_eq!(
        (
            report[0]["over_budget"].as_bool(),
            report[1]["over_budget"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert_eq!(report[1]["segments"], 2);
    assert_eq!(report[1]["status"], 201);
    assert_eq!(report[2]["summary"]["over_budget"], 1);
    assert_eq!(report[2]["summary"]["by_segments"], json!({"1": 1, "2": 1}));
    let before = app.stored().await.links;
    let refuse = compose(
        &app,
        &[
            ("template", TEMPLATE),
            ("country", "FR"),
            ("budget", "1"),
            ("over_budget", "refuse"),
        ],
        &recipients,
    )
    .await;
    assert_eq!(refuse[0]["status"], 201);
    assert_eq!(refuse[1]["status"], 422);
    assert_eq!(refuse[1]["error"]["code"], "over_budget");
    assert!(refuse[1]["code"].is_null());
    assert_eq!(refuse[2]["summary"]["over_budget"], 1);
    assert_eq!(refuse[2]["summary"]["failed"], 1);
    assert_eq!(app.stored().await.links, before + 1);
}

#[tokio::test]
async fn csv_in_and_out() {
    let app = spawn_app(Backend::Sqlite).await;
    // The third recipient's name holds a line break (a spreadsheet cell of two lines).
    let csv = "phone,ref,name,url\n06 12 34 56 78,c-1,\"Ann, Jr\",https://shop.example/a\n06 12,c-2,Bo,https://shop.example/b\r\n06 12 34 56 79,c-3,\"Cy\r\nDee\",https://shop.example/c\n";
    let query = [("template", TEMPLATE), ("country", "FR")];
    let answer = lines(send(&app, &query, "text/csv", None, csv.into()).await).await;
    assert_eq!(answer[0]["index"], 0);
    assert!(answer[0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Hi Ann, Jr, 20% off"));
    assert_eq!(answer[1]["error"]["code"], "invalid_phone");
    assert_eq!(answer[2]["index"], 2);
    assert!(
        answer[2]["text"]
            .as_str()
            .unwrap()
            .starts_with("Hi Cy\r\nDee, 20% off"),
        "{}",
        answer[2]
    );
    let response = post_compose(&app, &query)
        .header("content-type", "text/csv")
        .header("accept", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "text/csv; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    assert_eq!(&headers[0], "index");
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 4);
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    assert_eq!(&rows[0][column("phone")], "+33612345678");
    assert_eq!(&rows[0][column("segments")], "1");
    assert_eq!(&rows[1][column("error_code")], "invalid_phone");
    assert!(rows[2][column("text")].starts_with("Hi Cy\r\nDee,"));
    assert_eq!(&rows[3][column("index")], "summary");
    let summary: Value = serde_json::from_str(&rows[3][column("text")]).unwrap();
    assert_eq!(summary["recipients"], 3);
    // A header without a phone column is refused before anything.
    let response = send(&app, &query, "text/csv", None, "ref,name\nc-1,Ann\n".into()).await;
    assert_eq!(response.status(), 422);
    // An unknown variable: not a column.
    let response = send(
        &app,
        &[("template", "{{nmae}} {{link}}")],
        "text/csv",
        None,
        csv.into(),
    )
    .await;
    assert_eq!(response.status(), 422);
}

async fn an_interrupted_compose_retried_gives_the_same_codes(backend: Backend) {
    let app = spawn_app(backend).await;
    let recipients: Vec<Value> = (0..1_500)
        .map(|i| json!({"phone": format!("+336123{i:05}"), "variables": {"name": format!("n{i}")}, "url": format!("https://shop.example/{i}")}))
        .collect();
    let query = [("template", TEMPLATE)];
    // The first attempt got only 1,200 lines through.
    let response = send(
        &app,
        &query,
        "application/x-ndjson",
        Some("spring-1"),
        ndjson(&recipients[..1_200]),
    )
    .await;
    let first = lines(response).await;
    assert_eq!(first.len(), 1_201);
    let response = send(
        &app,
        &query,
        "application/x-ndjson",
        Some("spring-1"),
        ndjson(&recipients),
    )
    .await;
    let retry = lines(response).await;
    assert_eq!(retry.len(), 1_501);
    for (a, b) in first.iter().zip(&retry).take(1_200) {
        assert_eq!(a["code"], b["code"]);
        assert_eq!(a["text"], b["text"]);
        assert_eq!(b["status"], 201);
    }
    assert_eq!(app.stored().await.links, 1_500);
    // The same key with another template is another request.
    let response = send(
        &app,
        &[("template", "{{link}}")],
        "application/x-ndjson",
        Some("spring-1"),
        ndjson(&recipients),
    )
    .await;
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_key_reused");
}

#[tokio::test]
async fn the_command_line_composes_a_file_as_the_api_does() {
    let app = spawn_app(Backend::Sqlite).await;
    let dir = testkit::temp_dir();
    let input = dir.path().join("recipients.csv");
    let output = dir.path().join("messages.ndjson");
    std::fs::write(
        &input,
        "phone,name,url\n0612345678,Ann,https://shop.example/a\n0612,Bo,https://shop.example/b\n",
    )
    .unwrap();
    let (input, output_path) = (input.to_str().unwrap(), output.to_str().unwrap().to_owned());
    let output_path = output_path.as_str();
    let common = [
        "compose",
        input,
        "--template",
        TEMPLATE,
        "--country",
        "FR",
        "--budget",
        "1",
    ];
    // Runs the command with `more` arguments; its answer's lines.
    let app = &app;
    let run = |more: &'static [&'static str]| {
        let args = [&common[..], more, &["--output", output_path]].concat();
        async move {
            app.run_cli(&args).await;
            let answer = std::fs::read_to_string(output_path).unwrap();
            let lines: Vec<Value> = answer
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            lines
        }
    };
    let dry = run(&["--dry-run"]).await;
    assert_eq!(app.stored().await.links, 0);
    let lines = run(&["--idempotency-key", "k1"]).await;
    assert_eq!(lines[0]["phone"], "+33612345678");
    assert_eq!(lines[0]["status"], 201);
    assert_eq!(lines[1]["error"]["code"], "invalid_phone");
    assert_eq!(lines[2]["summary"]["segments"], 1);
    assert_eq!(dry[2]["summary"], lines[2]["summary"]);
    // Again with the key: the same code, nothing new.
    let again = run(&["--idempotency-key", "k1"]).await;
    assert_eq!(again[0]["code"], lines[0]["code"]);
    assert_eq!(app.stored().await.links, 1);
}

#[tokio::test]
async fn the_openapi_document_describes_compose_with_every_reference_resolved() {
    let app = spawn_app(Backend::Sqlite).await;
    let doc = app.get_json("/openapi.json").await;
    let operation = &doc["paths"]["/api/v1/compose"]["post"];
    let params: Vec<&str> = operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "template",
        "budget",
        "over_budget",
        "strip_scheme",
        "replace_lookalikes",
        "languages",
        "country",
        "dry_run",
        "Idempotency-Key",
    ] {
        assert!(params.contains(&name), "{name} in {params:?}");
    }
    let content = operation["requestBody"]["content"].as_object().unwrap();
    assert!(content.contains_key("application/x-ndjson") && content.contains_key("text/csv"));
    // Every `$ref` of the document names a schema it defines.
    let text = doc.to_string();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for reference in text.split("\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(
            schemas.contains_key(name),
            "{name} is referenced but not defined"
        );
    }
    for name in [
        "RecipientResult",
        "SummaryLine",
        "Summary",
        "ForcedChar",
        "OverBudget",
    ] {
        assert!(schemas.contains_key(name), "{name}");
    }
}

/// CSV injection: whatever a recipient's `ref`, message or phone starts with, the CSV answer's
/// cell opens as text in a spreadsheet (the console's downloads' rule).
#[tokio::test]
async fn csv_answer_cells_are_never_formulas() {
    let app = spawn_app(Backend::Sqlite).await;
    let hostile = [
        "=HYPERLINK(\"https://evil.example\",\"x\")",
        "+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1)",
        "\t=1",
        "\r=1",
    ];
    let mut recipients: Vec<Value> = hostile
        .iter()
        .map(|r| json!({"phone": "0612345678", "ref": r, "variables": {"name": r}, "url": "https://shop.example/sale"}))
        .collect();
    // A phone that is not one, quoted back in the error.
    recipients.push(json!({"phone": "=1+1", "ref": "p", "variables": {"name": "x"}, "url": "https://shop.example/sale"}));
    let response = post_compose(
        &app,
        &[("template", "{{name}} {{link}}"), ("country", "FR")],
    )
    .header("content-type", "application/x-ndjson")
    .header("accept", "text/csv")
    .body(ndjson(&recipients))
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    for (row, hostile) in rows.iter().zip(hostile) {
        // A ref with a tab or CR is refused (422), and quoted back in its row all the same.
        assert_eq!(&row[column("ref")], format!("'{hostile}"), "{row:?}");
        assert_eq!(&row[column("phone")], "+33612345678", "a phone is a number");
        if &row[column("status")] == "201" {
            assert!(row[column("text")].starts_with('\''), "{row:?}");
        }
    }
    let issued = rows.iter().filter(|row| &row[column("status")] == "201");
    assert_eq!(issued.count(), 4, "the printable ones issued");
    let bad_phone = &rows[hostile.len()];
    assert_eq!(&bad_phone[column("error_code")], "invalid_phone");
    for cell in bad_phone.iter() {
        assert!(!cell.starts_with(['=', '+', '-', '@']), "{bad_phone:?}");
    }
}
