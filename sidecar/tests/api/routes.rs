//! Every route the running app serves on its API listener (the one brands reach; the operator's
//! metrics listener is apart), read from its axum router, not from a document: a test
//! that walks them covers a route the day it is added.
//!
//! axum has no API that lists a router's routes, but its `Debug` form prints each route's path
//! by id (`Node { paths: {RouteId(3): "/api/v1/links", ..} }`) and, for each id, the
//! `MethodRouter` with the `Allow` header it answers a wrong method with (`allow_header:
//! Bytes(b"GET,HEAD,POST")`), which names exactly its methods. [`routes`] reads both and refuses
//! to answer if the form changed (an axum upgrade), rather than quietly listing nothing.

use reqwest::Method;
use shortlink_api::AppState;

/// One route: a method and the path pattern as the router matches it (`/api/v1/links/{code}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    pub method: Method,
    pub path: String,
}

/// The routes of the API listener (API, console, health) as `serve` builds it; HEAD
/// left out where GET is there (axum answers it with GET's handler).
pub fn routes(state: &AppState) -> Vec<Route> {
    let router = shortlink_api::router(state.clone(), shortlink_sidecar::console::router());
    let routes = parse(&format!("{router:?}"));
    assert!(
        routes.len() > 50,
        "only {} routes read from the router's Debug form: did axum change it?",
        routes.len()
    );
    routes
}

fn parse(debug: &str) -> Vec<Route> {
    // The routes proper; the fallback router's catch-alls come after.
    let (routed, _) = debug
        .split_once("fallback_router:")
        .expect("axum's Router Debug form names its fallback_router");
    let (handlers, paths) = routed
        .split_once("node: Node { paths: {")
        .expect("axum's PathRouter Debug form names its node's paths");
    let mut routes = Vec::new();
    for entry in paths.split("RouteId(").skip(1) {
        let (id, rest) = entry.split_once("): \"").expect("RouteId(n): \"path\"");
        let path = rest.split('"').next().unwrap_or_default();
        if path.contains("__private__axum") {
            // A nested router's catch-all: its fallback, no route of its own.
            continue;
        }
        let methods = allowed_methods(handlers, id)
            .unwrap_or_else(|| panic!("route {path}: no Allow header in its MethodRouter"));
        for method in methods.split(',').filter(|m| !m.is_empty()) {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            if method == Method::HEAD && methods.split(',').any(|m| m == "GET") {
                continue;
            }
            routes.push(Route {
                method,
                path: path.to_owned(),
            });
        }
    }
    routes.sort();
    routes
}

/// The methods of route `id` in the handlers part of the Debug form. A route of `any` method
/// has no Allow header (`allow_header: Skip`): it is walked with GET and POST.
fn allowed_methods<'a>(handlers: &'a str, id: &str) -> Option<&'a str> {
    let start = handlers.find(&format!("RouteId({id}): MethodRouter("))?;
    let rest = &handlers[start..];
    // Only this route's own part: the next route's Allow header is not its.
    let own = match rest[1..].find("RouteId(") {
        Some(end) => &rest[..end + 1],
        None => rest,
    };
    if own.contains("allow_header: Skip") {
        return Some("GET,POST");
    }
    let allow = own.find("allow_header: Bytes(b\"")? + "allow_header: Bytes(b\"".len();
    own[allow..].split('"').next()
}

#[test]
fn reads_paths_and_methods_from_a_routers_debug_form() {
    use axum::routing::{delete, get};
    let router: axum::Router = axum::Router::new()
        .route("/a", get(|| async {}).post(|| async {}))
        .nest(
            "/n",
            axum::Router::new().route("/b/{id}", delete(|| async {})),
        );
    let route = |method, path: &str| Route {
        method,
        path: path.to_owned(),
    };
    let mut expected = [
        route(Method::GET, "/a"),
        route(Method::POST, "/a"),
        route(Method::DELETE, "/n/b/{id}"),
    ];
    expected.sort();
    assert_eq!(parse(&format!("{router:?}")), expected);
}
