//! The harness itself: servers start, answer, and are gone afterwards.

use std::time::Duration;
use testkit::{mariadb, port_open, postgres, wait_until, MariaDb, RedisServer};

#[test]
fn redis_starts_restarts_and_stops() {
    let mut redis = RedisServer::start();
    assert_eq!(redis.cli(&["SET", "k", "v"]), "OK");
    assert_eq!(redis.cli_raw(&["GET", "k"]), "v");
    let pid = redis.process().unwrap().pid();

    redis.kill();
    assert!(!port_open(redis.port()));
    redis.start_again();
    assert_ne!(redis.process().unwrap().pid(), pid);
    assert_eq!(redis.cli_raw(&["GET", "k"]), "", "restarted empty");

    let port = redis.port();
    drop(redis);
    assert!(wait_until(Duration::from_secs(5), || !port_open(port)));
}

#[test]
fn postgres_gives_each_caller_a_fresh_database() {
    let cluster = postgres();
    let first = cluster.fresh_database_url();
    let second = cluster.fresh_database_url();
    assert_ne!(first, second);
    let name = first.rsplit('/').next().unwrap();
    cluster
        .query_in(name, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
        .unwrap();
    assert_eq!(
        cluster.query_in(name, "SELECT count(*) FROM t").unwrap(),
        "1"
    );
    let other = second.rsplit('/').next().unwrap();
    assert!(cluster.query_in(other, "SELECT count(*) FROM t").is_err());
}

#[test]
fn mariadb_gives_each_caller_a_fresh_database() {
    let server = mariadb();
    let first = server.fresh_database_url();
    let second = server.fresh_database_url();
    assert_ne!(first, second);
    assert!(first.starts_with("mysql://root@127.0.0.1:"));
    let name = first.rsplit('/').next().unwrap();
    server
        .query_in(name, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
        .unwrap();
    assert_eq!(
        server.query_in(name, "SELECT count(*) FROM t").unwrap(),
        "1"
    );
    let other = second.rsplit('/').next().unwrap();
    assert!(server.query_in(other, "SELECT count(*) FROM t").is_err());
}

#[test]
fn mariadb_keeps_committed_data_across_a_restart() {
    let mut server = MariaDb::dedicated();
    let url = server.fresh_database_url();
    let name = url.rsplit('/').next().unwrap().to_owned();
    server
        .query_in(
            &name,
            "CREATE TABLE t (x int) ENGINE=InnoDB; INSERT INTO t VALUES (1)",
        )
        .unwrap();
    server.stop();
    assert!(!server.is_running());
    assert!(!port_open(server.port()));
    server.start_again();
    server.query_in(&name, "INSERT INTO t VALUES (2)").unwrap();
    server.kill();
    server.start_again();
    assert_eq!(
        server.query_in(&name, "SELECT count(*) FROM t").unwrap(),
        "2"
    );

    let port = server.port();
    drop(server);
    assert!(wait_until(Duration::from_secs(5), || !port_open(port)));
}
