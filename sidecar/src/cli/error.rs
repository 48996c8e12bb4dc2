//! The error every subcommand and the importer's sources return: any error, said as it is. A
//! leaf of its own, so the subcommands and the sources need nothing of `cli/mod.rs`.

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
