//! One module per group of subcommands, plus the arguments they share.

pub mod common;
pub mod filters;
