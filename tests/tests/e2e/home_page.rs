//! Each short domain's home page at `/` (nginx/home.conf.template): the branded 404 page until the
//! operator names a URL for the domain (then a redirect there) or `page` (the static home page);
//! other domains are unaffected.

use shortlink_e2e::System;

#[test]
fn the_home_page_is_the_404_page_or_the_domains_own_redirect() {
    let system = System::start();
    let not_found = std::fs::read_to_string(
        shortlink_e2e::paths::workspace_dir().join("nginx/errors/404.html"),
    )
    .unwrap();
    for host in ["s1.test", "s2.test"] {
        let home = system.nginx.get(host, "/");
        assert_eq!(home.status(), 404, "{host}");
        assert_eq!(home.text().unwrap(), not_found, "{host}: the branded page");
    }

    std::fs::write(
        system.nginx.prefix.join("home.conf"),
        "map $host $shortlink_home {\n    default \"\";\n    s2.test \"https://brand.example/\";\n    s3.test page;\n}\n",
    )
    .unwrap();
    // An old worker may still take a request after the reload and answer it by the old
    // configuration (waiting for one new answer was not enough: the next met an old worker).
    system.nginx.reload_and_retire_old_workers();
    let home = system.nginx.get("s2.test", "/");
    assert_eq!(home.status(), 302, "s2.test's home: a redirect");
    assert_eq!(home.headers()["location"], "https://brand.example/");
    assert_eq!(system.nginx.get("s1.test", "/").status(), 404);
    let home_page = std::fs::read_to_string(
        shortlink_e2e::paths::workspace_dir().join("nginx/errors/home.html"),
    )
    .unwrap();
    let page = system.nginx.get("s3.test", "/");
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.text().unwrap(),
        home_page,
        "s3.test: the static home page"
    );
    // The page's internal location is not a public path.
    assert_eq!(
        system.nginx.get("s3.test", "/.shortlink-home").status(),
        404
    );
    // Codes still answer beside the home page.
    let code = system.create(serde_json::json!({"url": "https://example.com/x"}));
    assert_eq!(
        system.nginx.get("s2.test", &format!("/{code}")).status(),
        302
    );
    assert_eq!(
        system.nginx.get("s2.test", &format!("/{code}")).headers()["location"],
        "https://example.com/x"
    );
}
