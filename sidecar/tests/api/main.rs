//! API tests against real servers: the sidecar's router in-process (or its binary), a fresh SQLite
//! file, PostgreSQL or MariaDB database and a fresh redis-server per test.

mod analytics;
mod audit;
mod auth;
mod background;
mod batch;
mod caps;
mod cards;
mod cluster;
mod code_scheme;
mod compose;
mod config_file;
mod console;
mod domain_certificate;
mod domain_health;
mod health;
mod helpers;
mod idempotency;
mod import_export;
mod import_sources;
mod issuing;
mod links;
mod mariadb;
mod metrics;
mod multiprocess;
mod outages;
mod projection_marker;
mod qr;
mod rate_limits;
mod resolve;
mod rules;
mod rules_fallback;
mod sentinel;
mod validation;
mod visit_caches;
mod webhooks;
