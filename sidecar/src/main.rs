#![forbid(unsafe_code)]

use clap::Parser;
use shortlink_sidecar::cli::{self, Cli};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    shortlink_sidecar::init_tracing();
    match cli::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shortlink-sidecar: {error}");
            ExitCode::FAILURE
        }
    }
}
