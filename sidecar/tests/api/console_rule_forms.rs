//! The rule editor's forms (issue 80) write the rules the API takes: every example rule set of
//! docs/RULES.md, and one with every condition and option of its tables, shown in the forms and
//! posted back unchanged, come back from the API as they were.

use crate::console::Browser;
use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The `rules` of every JSON example in docs/RULES.md that has some.
fn documented_rule_sets() -> Vec<Value> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/RULES.md"))
        .expect("docs/RULES.md");
    let sets: Vec<Value> = doc
        .split("```json")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .filter_map(|example| example.get("rules").cloned())
        .collect();
    assert!(!sets.is_empty(), "no example rule set in docs/RULES.md");
    sets
}

/// Every condition of the doc's table and every answer option, in four rules (at most 8
/// conditions a rule).
fn every_field() -> Value {
    json!([
        {"if": {"device": ["android", "desktop"], "language": ["pt", "en-gb"], "country": ["PT"],
                "query": [{"name": "src", "value": "sms"}, {"name": "promo"}],
                "ip": ["192.0.2.0/24", "2001:db8::/32"],
                "after": "2026-12-01T09:00:00Z", "before": "2027-01-01T00:00:00Z"},
         "then": {"url": "https://shop.example/pt", "redirect": 307, "forward_query": true}},
        {"if": {"weekly": {"days": ["mon", "fri"], "hours": [9, 10, 11], "zone": "Europe/Lisbon"}},
         "then": {"url": "https://shop.example/office-hours", "forward_query": false}},
        {"if": {"device": ["other"]}, "split": {"sticky": "cookie", "variants": [
            {"weight": 70, "url": "https://shop.example/a", "redirect": 301},
            {"weight": 20, "url": "https://shop.example/b", "forward_query": false},
            {"weight": 10, "url": "https://shop.example/c"}]}},
        {"if": {}, "split": {"sticky": "visitor", "variants": [
            {"weight": 1, "url": "https://shop.example/d"}, {"weight": 1, "url": "https://shop.example/e"}]}}
    ])
}

/// An attribute's value in one tag's text (`name="…"`), unescaped as far as maud escapes.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let value = &tag[start..start + tag[start..].find('"')?];
    Some(
        value
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// `fields` as a form takes them.
fn as_pairs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    (fields.iter())
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// Posts the rules' forms of link `code`.
async fn save_rules_form(
    browser: &mut Browser<'_>,
    code: &str,
    pairs: &[(&str, &str)],
) -> reqwest::Response {
    let path = format!("/console/links/{code}/rules/form");
    browser.post(&path, pairs).await
}

/// What a browser posts for the rule forms as the page shows them: text fields, ticked boxes,
/// each select's chosen option.
fn posted_fields(page: &str) -> Vec<(String, String)> {
    let form = page
        .split("<form class=\"stack rule-form\"")
        .nth(1)
        .expect(page);
    let form = form.split("</form>").next().unwrap();
    let mut fields = Vec::new();
    for piece in form.split('<').skip(1) {
        let tag = piece.split('>').next().unwrap();
        if tag.starts_with("input ") {
            let name = attribute(tag, "name").unwrap();
            let kind = attribute(tag, "type").unwrap_or_default();
            if kind == "checkbox" && !tag.contains(" checked") {
                continue;
            }
            fields.push((name, attribute(tag, "value").unwrap_or_default()));
        } else if tag.starts_with("select ") {
            let name = attribute(tag, "name").unwrap();
            let rest = &form[form.find(tag).unwrap()..];
            let options = rest.split("</select>").next().unwrap();
            let chosen = (options.split("<option").skip(1))
                .find(|option| option.contains(" selected"))
                .or_else(|| options.split("<option").nth(1))
                .and_then(|option| attribute(option, "value"))
                .unwrap_or_default();
            fields.push((name, chosen));
        }
    }
    fields
}

#[tokio::test]
async fn the_forms_round_trip_every_documented_rule_set() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let mut sets = documented_rule_sets();
    sets.push(every_field());
    for rules in sets {
        let link = app
            .create(json!({"url": "https://shop.example/spring", "rules": rules}))
            .await;
        let code = link["code"].as_str().unwrap().to_owned();
        let before = app.get_json(&format!("/links/{code}")).await["rules"].clone();
        assert!(before.is_array(), "{link}");

        let page = browser.page(&format!("/console/links/{code}/rules")).await;
        let fields = posted_fields(&page);
        let saved = save_rules_form(&mut browser, &code, &as_pairs(&fields)).await;
        assert_eq!(
            saved.status(),
            StatusCode::SEE_OTHER,
            "{:?}",
            saved.text().await
        );
        let after = app.get_json(&format!("/links/{code}")).await["rules"].clone();
        assert_eq!(after, before, "the forms changed the rules");
    }
}

/// A rule added in the empty fieldset is saved after the others; one marked removed is gone.
#[tokio::test]
async fn the_forms_add_and_remove_a_rule() {
    let app = spawn_app(Backend::Sqlite).await;
    let rules = json!([{"if": {"country": ["PT"]}, "then": {"url": "https://shop.example/pt"}}]);
    let code = app
        .create(json!({"url": "https://shop.example/", "rules": rules}))
        .await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page(&format!("/console/links/{code}/rules")).await;
    let mut fields = posted_fields(&page);
    for (name, value) in &mut fields {
        match name.as_str() {
            "r1.device" => unreachable!("unticked boxes are not posted"),
            "r1.url" => *value = "https://apps.apple.com/app/id123".into(),
            _ => {}
        }
    }
    fields.push(("r1.device".into(), "ios".into()));
    let pairs = as_pairs(&fields);
    let saved = save_rules_form(&mut browser, &code, &pairs).await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let rules = app.get_json(&format!("/links/{code}")).await["rules"].clone();
    assert_eq!(rules[1]["if"]["device"], json!(["ios"]), "{rules}");
    assert_eq!(rules[1]["then"]["url"], "https://apps.apple.com/app/id123");

    // Removing the first: only the added one stays.
    let mut pairs = pairs.clone();
    pairs.push(("r0.remove", "1"));
    let saved = save_rules_form(&mut browser, &code, &pairs).await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let rules = app.get_json(&format!("/links/{code}")).await["rules"].clone();
    assert_eq!(rules.as_array().unwrap().len(), 1, "{rules}");
    assert_eq!(rules[0]["if"]["device"], json!(["ios"]));

    // A weight that is not a number: refused with the field named, nothing saved.
    let csrf = browser.csrf().await;
    let half = [
        ("csrf", csrf.as_str()),
        ("r0.answer", "split"),
        ("r0.v0.url", "https://shop.example/a"),
        ("r0.v0.weight", "half"),
    ];
    let refused = browser
        .post(&format!("/console/links/{code}/rules/form"), &half)
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.text().await.unwrap().contains("weight"));
}
