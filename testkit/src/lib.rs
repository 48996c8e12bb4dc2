//! Real servers for tests, on free loopback ports.
//!
//! Every process started here is tied to the test process by a lifeline (see [`process`]): when the
//! test process ends, however it ends, its servers are stopped and their directories removed. So a
//! panicking or killed test never leaves a Redis, PostgreSQL, MariaDB or nginx behind.

mod busy;
pub mod cluster;
mod host;
pub mod kannel;
mod knob;
pub mod mariadb;
pub mod postgres;
pub mod process;
pub mod proxy;
pub mod redis;
pub mod sentinel;
pub mod sidecar;
pub mod smsc;
pub mod sql_server;
pub mod yourls;

pub use busy::CpuHogs;
pub use cluster::RedisCluster;
pub use host::{free_port, free_ports, port_open, temp_dir, wait_until};
pub use kannel::Kannel;
pub use knob::knob;
pub use mariadb::{mariadb, MariaDb};
pub use postgres::{postgres, Postgres};
pub use process::{Lifeline, Signal};
pub use proxy::Proxy;
pub use redis::RedisServer;
pub use sentinel::{SentinelGroup, SentinelServer, SentinelTiming};
pub use sidecar::Sidecar;
pub use smsc::{SmscDouble, Verdict};
pub use sql_server::SqlServer;
