//! One module per subcommand: its flags (a `clap::Args` struct) and its `run` function.

pub mod compare;
pub mod eval;
pub mod hash;
pub mod run;
pub mod sweep;
