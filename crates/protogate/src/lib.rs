//! The `protogate` binary's library: command line, configuration file, logging, signals, the
//! demo and the convert tool. Everything that touches flags, the environment or files lives
//! here; `edge` and `transcode` get plain values.
//!
//! # Layout
//! - `cli`: the command line (clap), and the values of `report`'s flags.
//! - [`config`]: the TOML file as written ([`config::raw`]) and its resolution with the flags
//!   into the edge's settings ([`config::resolve`](mod@config::resolve)).
//! - `duration`: `parse_duration`, the durations of flags and keys (`config` re-exports it).
//! - `listen`: `--listen` addresses (IPs, host names, `:PORT`) and binding them.
//! - `schema_files`: reading descriptor sets and `.proto` files for `transcode`.
//! - `disk`: the files one load reads, each read once (what a reload notes as loaded).
//! - `run`: `protogate serve`.
//! - [`demo`]: the embedded demo shop service and `protogate demo`.
//! - `convert`: `protogate convert`.
//! - `report`: `protogate report`, a running gateway's migration report in a terminal.

mod check;
mod cli;
pub mod config;
mod convert;
pub mod demo;
mod disk;
mod duration;
pub mod import;
pub mod jwks;
mod listen;
mod logging;
#[cfg(feature = "otel")]
mod otel;
pub mod process;
mod reload;
mod report;
mod run;
mod schema;
mod schema_files;
mod tls;

use std::process::ExitCode;

use clap::Parser;

/// The upstreams of a resolved configuration as `serve` builds them (each `https://` URL with
/// its TLS from its files, each upstream's health checks). For the integration tests'
/// in-process gateway (tests/src/lib.rs), not for users.
#[doc(hidden)]
pub use config::build_upstreams;

/// Exit code for a configuration or schema that cannot be used (EX_USAGE).
const EXIT_CONFIG: u8 = 64;

/// A configuration file's text read and resolved as `protogate serve --config FILE` does when
/// no other flag is given (relative paths under `/`); nothing is opened or bound. For the fuzz
/// target `config` (fuzz/), not for users.
#[doc(hidden)]
pub fn check_config(text: &str) -> Result<(), config::ConfigError> {
    let file = config::FileConfig::parse(text, std::path::Path::new("/"))?;
    config::resolve(cli::ServeArgs::default(), file).map(drop)
}

/// Runs the command line; returns the process exit code.
pub fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Serve(args) => run::serve(args),
        cli::Command::Check(args) => check::run(args),
        cli::Command::Demo(args) => demo::run(args),
        cli::Command::Convert(args) => convert::run(args),
        cli::Command::Report(args) => report::run(args),
        cli::Command::Import(args) => import::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("protogate: {err:#}");
            ExitCode::from(match err.downcast_ref::<config::ConfigError>() {
                Some(_) => EXIT_CONFIG,
                None => 1,
            })
        }
    }
}
