//! The end-to-end tests, one module per concern, linked into one test binary: every test binary
//! links reqwest, tokio, fantoccini and the rest, and one per file (42) spent most of an e2e build
//! linking them. Tests run as many at a time as there are cores (`cargo test`'s default), now across
//! modules as they did within a file, so none may assume it is alone in the process. One module:
//! `cargo test -p shortlink-e2e --test e2e -- <module>::`.

mod analytics;
mod app_links;
mod audit_requests;
mod batch;
mod batch_flow;
mod click_ids;
mod click_rules;
mod click_webhooks;
mod cluster;
mod cluster_replicas;
mod cluster_system;
mod code_scheme;
mod compose;
mod compose_browser;
mod console;
mod console_widths_browser;
mod contract;
mod crate_graph;
mod delivery_callbacks;
mod docs;
mod domain_chart_browser;
mod domain_failover;
mod domain_health;
mod domains;
mod edge_cache;
mod fallback_hosts;
mod faults;
mod home_page;
mod hostile;
mod imported_codes;
mod imported_links;
mod invalidation;
mod layering;
mod limits;
mod metrics;
mod migration_guide;
mod module_pages;
mod not_found_redirects;
mod orphan_visits;
mod password_links;
mod preview_card_browser;
mod preview_cards;
mod private_checkout;
mod qr;
mod record_versions;
mod redirect;
mod replicas;
mod rules_fallback;
mod run_script;
mod scanner_corpus;
mod scanners;
mod secrets;
mod sentinel;
mod shared_sqlite;
mod sizes;
mod sticky_splits;
mod tls;
mod trailing_punctuation;
mod visit_caps;
mod workspace_hosts;
mod workspaces;
