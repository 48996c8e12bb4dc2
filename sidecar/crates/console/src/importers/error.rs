//! The error the importers return: any error, said as it is (the `import` subcommand's own
//! `BoxError` is the same type).

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
