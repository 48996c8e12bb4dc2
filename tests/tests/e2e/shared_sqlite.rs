//! The CLI beside a running sidecar on one SQLite file (issue 82): an operator's `keys create` or
//! `workspaces` while the sidecar starts on a new file, and while it writes a batch. SQLite has
//! one writer and no queue: the sidecar's migrator and the command's used to collide on a new
//! file (`UNIQUE constraint failed: _sqlx_migrations.version`), and a command waits for a free
//! moment between the batch's groups.

use shortlink_e2e::{http_client, paths, API_KEY, CODE_SECRET};
use std::process::Command;
use std::time::Duration;
use testkit::{RedisServer, Sidecar};

/// The commands an operator runs beside the sidecar, the `n`th time; each must succeed.
fn operator_commands(database_url: &str, n: usize) {
    let (key, slug) = (format!("tool-{n}"), format!("brand-{n}"));
    let commands: [&[&str]; 3] = [
        &["keys", "create", "--name", &key, "--role", "viewer"],
        &["workspaces", "create", &slug],
        &["workspaces", "list"],
    ];
    for args in commands {
        let output = Command::new(paths::sidecar_bin())
            .args(args)
            .args(["--database-url", database_url, "--code-secret", CODE_SECRET])
            // What the error says to do when a batch holds the lock: an operator's command waits
            // longer than a request.
            .args(["--db-timeout", "60s"])
            .env("RUST_LOG", "warn")
            .output()
            .expect("run shortlink-sidecar");
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn ndjson(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| format!("{{\"url\":\"https://shop.example/o?r={i}\"}}\n").into_bytes())
        .collect()
}

#[test]
fn cli_commands_beside_a_starting_sidecar_and_its_batch_all_succeed() {
    let redis = RedisServer::start();
    let dir = testkit::temp_dir();
    let database_url = format!("sqlite://{}", dir.path().join("shortlink.db").display());
    let sidecar = Sidecar {
        database_url: &database_url,
        redis_url: &redis.url(),
        secret_hex: CODE_SECRET,
        api_key: API_KEY,
        args: &[],
    };
    // The commands and the sidecar open the new file at once: both migrate it.
    let (_process, base) = std::thread::scope(|scope| {
        let commands: Vec<_> = (0..3)
            .map(|n| {
                scope.spawn({
                    let database_url = &database_url;
                    move || operator_commands(database_url, n)
                })
            })
            .collect();
        let started = sidecar.start(paths::sidecar_bin(), dir.path().join("sidecar.log"));
        for command in commands {
            command.join().expect("the commands succeed");
        }
        started
    });

    let lines = 100_000;
    std::thread::scope(|scope| {
        let batch = scope.spawn(|| {
            let answer = http_client()
                .post(format!("{base}/api/v1/links/batch"))
                .bearer_auth(API_KEY)
                .header("content-type", "application/x-ndjson")
                .timeout(Duration::from_secs(600))
                .body(ndjson(lines))
                .send()
                .expect("reach the sidecar");
            answer.text().expect("the whole answer")
        });
        // Again and again while the batch is written, at least once.
        let mut n = 3;
        loop {
            operator_commands(&database_url, n);
            n += 1;
            if batch.is_finished() {
                break;
            }
        }
        let answer = batch.join().expect("the batch answers");
        let created = answer
            .lines()
            .filter(|line| line.contains("\"status\":201"));
        let other = answer
            .lines()
            .find(|line| !line.contains(r#""status":201"#));
        assert_eq!(created.count(), lines, "every line stored: {other:?}");
    });
}
