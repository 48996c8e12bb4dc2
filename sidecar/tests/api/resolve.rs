//! `GET /api/v1/resolve/{code}`: the answer nginx's fallback relays, and the Redis repair.

use crate::helpers::*;
use serde_json::{json, Value};
use std::time::Duration;

crate::on_each_backend!(
    resolve_answers_as_the_module_would,
    resolve_repairs_missing_redis_keys,
    a_capped_click_is_counted_once_per_token,
);

async fn resolve_answers_as_the_module_would(backend: Backend) {
    let app = spawn_app(backend).await;
    let plain = app
        .create(json!({"url": "https://a.example/p?x=1#frag"}))
        .await;
    let plain = plain["code"].as_str().unwrap();
    let forwarding = app
        .create(
            json!({"url": "https://a.example/p?x=1#frag", "forward_query": true, "redirect": 301}),
        )
        .await;
    let forwarding = forwarding["code"].as_str().unwrap();

    // Live: the status and Location, the query string only when the link forwards it.
    let response = app.resolve(&format!("{plain}?utm=sms")).await;
    assert_eq!(response.status(), 302);
    assert_eq!(
        response.headers()["location"],
        "https://a.example/p?x=1#frag"
    );
    assert_eq!(response.headers()["cache-control"], "no-store");
    let response = app.resolve(&format!("{forwarding}?utm=sms&r=42")).await;
    assert_eq!(response.status(), 301);
    assert_eq!(
        response.headers()["location"],
        "https://a.example/p?x=1&utm=sms&r=42#frag"
    );
    assert_eq!(response.headers()["cache-control"], "public, max-age=3600");
    for status in [307, 308] {
        let link = app
            .create(json!({"url": "https://b.example/", "redirect": status}))
            .await;
        let response = app.resolve(link["code"].as_str().unwrap()).await;
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(response.headers()["location"], "https://b.example/");
    }

    // Revoked: 410.
    app.delete_link(plain).await;
    let response = app.resolve(plain).await;
    assert_eq!(response.status(), 410);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "gone"
    );

    // Expired: 410 during the grace period, 404 after, as the Redis TTL makes nginx answer.
    let expiring = &app.create_code("https://c.example/").await;
    app.set_expiry_in_sql(expiring, now_secs() - 60).await;
    assert_eq!(app.resolve(expiring).await.status(), 410);
    app.set_expiry_in_sql(expiring, now_secs() - GRACE_SECS - 60)
        .await;
    assert_eq!(app.resolve(expiring).await.status(), 404);

    // Unknown, wrong check character, impossible shapes: 404.
    let generated = forwarding.to_owned();
    let mut bad_check = generated.clone().into_bytes();
    let last = bad_check.len() - 1;
    bad_check[last] = if bad_check[last] == b'0' { b'1' } else { b'0' };
    let bad_check = String::from_utf8(bad_check).unwrap();
    assert_eq!(
        app.scheme.shape(bad_check.as_bytes()),
        shortcode::Shape::BadCheck
    );
    for code in [
        "unknown-alias",
        bad_check.as_str(),
        "ab",
        "a%00b",
        "..",
        "%2e%2e%2fetc",
    ] {
        let response = app.resolve(code).await;
        assert_eq!(response.status(), 404, "{code}");
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            "not_found"
        );
    }
}

async fn resolve_repairs_missing_redis_keys(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let live = &app.create_code("https://a.example/").await;
    let revoked = &app.create_code("https://b.example/").await;
    app.delete_link(revoked).await;

    let mut redis = app.redis().await;
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(app.resolve(live).await.status(), 302);
    assert_eq!(app.resolve(revoked).await.status(), 410);
    let repaired = eventually(Duration::from_secs(5), || async {
        app.redis_get(live).await.is_some() && app.redis_get(revoked).await.is_some()
    })
    .await;
    assert!(repaired, "resolve rewrote the missing keys");
    assert_eq!(
        app.redis_get(live).await.as_deref(),
        Some("1|L|302|0|0|https://a.example/")
    );
    assert_eq!(
        app.redis_get(revoked).await.as_deref(),
        Some("1|R|410|0|0|")
    );

    // Repair never overwrites a key that exists (it may be newer than what resolve read).
    let _: () = redis::cmd("SET")
        .arg(format!("sl:c:{live}"))
        .arg("1|L|302|0|0|https://newer.example/")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(app.resolve(live).await.status(), 302);
    // Repairs run in the background: a second resolve of another code, repaired in turn, shows
    // the first repair attempt has had its chance.
    let _: () = redis::cmd("DEL")
        .arg(format!("sl:c:{revoked}"))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(app.resolve(revoked).await.status(), 410);
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.redis_get(revoked).await.is_some()
        })
        .await
    );
    assert_eq!(
        app.redis_get(live).await.as_deref(),
        Some("1|L|302|0|0|https://newer.example/")
    );
    // Writes through the API always overwrite.
    app.patch_link(live, &json!({"redirect": 307})).await;
    assert_eq!(
        app.redis_get(live).await.as_deref(),
        Some("1|L|307|0|0|https://a.example/")
    );

    // With Redis down, resolve still answers from SQL.
    app.redis.stop();
    assert_eq!(app.resolve(live).await.status(), 307);
    assert_eq!(app.resolve(revoked).await.status(), 410);
}

/// Punctuation a text glued to a short link (`shortlink_wire::trailing`): the fallback applies the
/// module's rule to the code nginx passes it. The exact code first (an imported `promo.` is
/// itself), else the code without its trailing run, whichever way the characters reached it:
/// as characters (the path decoded) or still percent-encoded (the module passes codes raw).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_answers_a_code_with_glued_punctuation_as_the_code() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://a.example/generated").await;
    let dir = testkit::temp_dir();
    let csv = dir.path().join("links.csv");
    std::fs::write(
        &csv,
        "code,url,domain\n\
         promo.,https://old.example/dot,s.old.example\n\
         promo,https://old.example/plain,s.old.example\n",
    )
    .unwrap();
    let (outcome, report) =
        crate::import_sources::import(&app, &["--from", "csv", csv.to_str().unwrap()]).await;
    outcome.unwrap();
    assert_eq!(report["imported"], 2, "{report}");

    let answer = |path: String| {
        let app = &app;
        async move {
            let response = app.resolve(&path).await;
            let location = response.headers().get("location").cloned();
            let location = location.map(|value| value.to_str().unwrap().to_owned());
            (
                response.status().as_u16(),
                location.unwrap_or_default(),
                path,
            )
        }
    };
    let mut utf8 = [0; 4];
    for c in shortlink_wire::trailing::TRAILING {
        let encoded: String = c
            .encode_utf8(&mut utf8)
            .bytes()
            .map(|b| format!("%{b:02X}"))
            .collect();
        // Decoded by the route to the character; and `%25`-escaped, decoded to the escape.
        let forms = [encoded.clone(), encoded.replace('%', "%25")];
        for form in forms {
            let (status, location, path) = answer(format!("{code}{form}")).await;
            assert_eq!(status, 302, "{path}");
            assert_eq!(location, "https://a.example/generated", "{path}");
        }
    }
    for (path, status, location) in [
        ("promo.", 302, "https://old.example/dot"),
        ("promo%2E", 302, "https://old.example/dot"),
        ("promo", 302, "https://old.example/plain"),
        ("promo..", 302, "https://old.example/plain"),
        ("promo%E3%80%82", 302, "https://old.example/plain"),
        ("promo,)", 302, "https://old.example/plain"),
        ("nothing-here.", 404, ""),
        // A path of punctuation alone (not `.`: a dot segment the client itself removes).
        ("%2C%29", 404, ""),
        ("%E3%80%82%E3%80%82", 404, ""),
        ("promo.x", 404, ""),
    ] {
        let seen = answer(path.to_owned()).await;
        assert_eq!((seen.0, seen.1.as_str()), (status, location), "{path}");
    }
}

/// A person's tap on a capped link with the token nginx names (`X-Shortlink-Click-Token`, the
/// module's click whose count it sent without getting the reply): counted with that token, so a
/// click Redis counted already spends nothing more and gets its own number's answer again. A
/// token that is no click id is nginx's mistake: the click is counted with one of the sidecar's.
async fn a_capped_click_is_counted_once_per_token(backend: Backend) {
    let app = spawn_app(backend).await;
    let once = app
        .create(json!({"url": "https://a.example/once", "max_visits": 1,
                       "expired_url": "https://a.example/over"}))
        .await;
    let once = once["code"].as_str().unwrap();
    let module = Some("AAAAAAAAAAAAAAAB");
    assert_eq!(tap(&app, once, module).await, "https://a.example/once");
    assert_eq!(
        tap(&app, once, module).await,
        "https://a.example/once",
        "the same click"
    );
    assert_eq!(counted(&app, once).await, Some(1));
    let another = Some("AAAAAAAAAAAAAAAC");
    assert_eq!(tap(&app, once, another).await, "https://a.example/over");
    assert_eq!(tap(&app, once, None).await, "https://a.example/over");
    let malformed = Some("not a click id");
    assert_eq!(tap(&app, once, malformed).await, "https://a.example/over");
    assert_eq!(counted(&app, once).await, Some(4));
}

/// A phone's tap on `code` through the fallback, with nginx's click token if given: `Location`.
async fn tap(app: &TestApp, code: &str, token: Option<&str>) -> String {
    let mut request = (app.fallback("default", code).await)
        .header("user-agent", PHONE_AGENT)
        .header("accept-language", "en");
    if let Some(token) = token {
        request = request.header(shortlink_wire::fallback::CLICK_TOKEN_HEADER, token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 302);
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// The clicks counted on `code` (`sl:n:<code>`).
async fn counted(app: &TestApp, code: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(shortlink_wire::keys::visit_count_key(code))
        .query_async(&mut app.redis().await)
        .await
        .unwrap()
}
