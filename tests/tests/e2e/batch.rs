//! Batch issuance end to end: a mixed batch posted through nginx's internal API server, then every
//! item looked up on the redirect server. Good items redirect (status and `Location` as sent), bad
//! ones left nothing behind (404).

use serde_json::{json, Value};
use shortlink_e2e::{location, System};

/// One item, what the batch must answer for it, and (for good items) the redirect expected.
struct Case {
    item: Value,
    status: u16,
    redirect: Option<(u16, &'static str)>,
    /// A bad item's alias: nginx must not know it.
    alias: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            item: json!({"url": "https://example.com/a?x=1", "campaign": "spring"}),
            status: 201,
            redirect: Some((302, "https://example.com/a?x=1")),
            alias: None,
        },
        Case {
            item: json!({"url": "javascript:alert(1)", "code": "bad-scheme"}),
            status: 422,
            redirect: None,
            alias: Some("bad-scheme"),
        },
        Case {
            item: json!({"url": "https://example.com/b", "redirect": 301, "code": "spring-b"}),
            status: 201,
            redirect: Some((301, "https://example.com/b")),
            alias: None,
        },
        Case {
            // A target on our own short domain: a redirect loop.
            item: json!({"url": "https://s1.test/loop", "code": "loop-alias"}),
            status: 422,
            redirect: None,
            alias: Some("loop-alias"),
        },
        Case {
            item: json!({"url": "https://example.com/c", "code": "spring-b"}),
            status: 409,
            redirect: None,
            alias: None,
        },
        Case {
            item: json!({"url": "https://example.com/d", "code": "unknown-field", "colour": 1}),
            status: 422,
            redirect: None,
            alias: Some("unknown-field"),
        },
        Case {
            item: json!({"url": "https://example.com/e", "redirect": 307}),
            status: 201,
            redirect: Some((307, "https://example.com/e")),
            alias: None,
        },
    ]
}

#[test]
fn a_mixed_ndjson_batch_through_nginx_redirects_its_good_items_only() {
    let system = System::start();
    let cases = cases();
    let mut body = String::new();
    for case in &cases {
        body.push_str(&case.item.to_string());
        body.push('\n');
    }
    // One line that is not JSON at all.
    body.push_str("{\"url\": \n");

    let (status, results) = system.api().post_ndjson("/links/batch", body);
    assert_eq!(status, 200);
    let text = format!("{results:?}");
    assert_eq!(results.len(), cases.len() + 1, "{text}");
    assert_eq!(results[cases.len()]["status"], 400, "{text}");

    for (index, (case, result)) in cases.iter().zip(&results).enumerate() {
        assert_eq!(result["index"], index, "{result}");
        assert_eq!(result["status"], case.status, "item {index}: {result}");
        match case.redirect {
            Some((status, target)) => {
                let code = result["link"]["code"].as_str().expect("a code");
                // The short URL names a pool domain, built by the sidecar from nginx's header.
                let short_url = result["link"]["short_url"].as_str().unwrap_or_default();
                assert!(short_url.ends_with(&format!("/{code}")), "{result}");
                for host in ["s1.test", "s2.test"] {
                    let response = system.nginx.get(host, &format!("/{code}"));
                    assert_eq!(response.status(), status, "item {index} on {host}");
                    assert_eq!(location(&response), target, "item {index}");
                }
            }
            None => {
                assert!(result["error"]["code"].is_string(), "{result}");
                assert!(result.get("link").is_none(), "{result}");
            }
        }
        if let Some(alias) = case.alias {
            let response = system.nginx.get("s1.test", &format!("/{alias}"));
            assert_eq!(
                response.status(),
                404,
                "bad item {index} ({alias}) must not exist"
            );
        }
    }

    // The refused duplicate alias did not overwrite the first one.
    let response = system.nginx.get("s2.test", "/spring-b");
    assert_eq!(response.status(), 301);
    assert_eq!(location(&response), "https://example.com/b");
}

#[test]
fn a_json_batch_through_nginx_answers_in_order_and_redirects() {
    let system = System::start();
    let items: Vec<Value> = (0..1_500)
        .map(|i| {
            if i % 500 == 7 {
                json!({"url": format!("ftp://example.com/{i}")})
            } else {
                json!({"url": format!("https://example.com/item/{i}")})
            }
        })
        .collect();
    let (status, answer) = system.api().post("/links/batch", &json!(items));
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), items.len());
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i);
        if i % 500 == 7 {
            assert_eq!(result["status"], 422, "{result}");
            continue;
        }
        assert_eq!(result["status"], 201, "{result}");
        // A sample across both chunks is enough to show they reached Redis.
        if i % 97 == 0 {
            let code = result["link"]["code"].as_str().unwrap();
            let response = system.nginx.get("s1.test", &format!("/{code}"));
            assert_eq!(response.status(), 302, "item {i}");
            assert_eq!(location(&response), format!("https://example.com/item/{i}"));
        }
    }
}
