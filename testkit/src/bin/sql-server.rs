//! `sql-server postgres|mariadb`: starts a throwaway server as the tests do (testkit's settings,
//! a free loopback port, a scratch directory), prints one fresh database's URL, and keeps the
//! server until its own stdin closes. For benchmarks written as scripts, which hold the pipe and
//! so cannot leave the server behind, whatever way they end.

use std::io::{Read, Write};

fn main() {
    let url = match std::env::args().nth(1).as_deref() {
        Some("postgres") => testkit::postgres().fresh_database_url(),
        Some("mariadb") => testkit::mariadb().fresh_database_url(),
        _ => {
            eprintln!("usage: sql-server postgres|mariadb");
            std::process::exit(2);
        }
    };
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{url}")
        .and_then(|()| stdout.flush())
        .expect("stdout");
    // Until the caller closes the pipe (or dies): the servers' guardians then stop them.
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}
