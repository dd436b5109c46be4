//! Configuration in two stages, as ripgrep's low and high arguments:
//!
//! - [`raw`]: the TOML file as written ([`FileConfig`] and its tables, unknown keys refused,
//!   relative paths made absolute). [`parse_duration`], which reads flags' and keys'
//!   durations alike, lives in `crate::duration` (below both `cli` and `config`) and is
//!   re-exported here.
//! - [`resolve`](mod@resolve): the flags over the file, checked and turned into the edge's
//!   settings ([`Resolved`]) before any port opens, and the upstreams as the edge builds them
//!   ([`upstream_specs`]); `tables` does the same for each of the file's tables (`[cors]`,
//!   `[compression]`, `[[http_rules]]`, …).
//!
//! Flags override the file; unknown keys in the file are errors.

mod access;
pub mod raw;
pub mod resolve;
mod tables;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;

use crate::cli::ServeArgs;
use crate::disk::Disk;

pub use crate::duration::parse_duration;
pub use access::JwksSource;
pub use raw::{
    CompressionFileConfig, CorsFileConfig, CustomPatternConfig, FileConfig, HttpRuleConfig,
    LevelConfig, MigrationFileConfig, OtelFileConfig, SchemaSource, ServiceConfig, SunsetFileRule,
    TlsFileConfig, UnknownQueryConfig, UpstreamCompression, Urls,
};
pub use resolve::{Reflection, Resolved, UpstreamSpecs, build_upstreams, resolve, upstream_specs};
pub use tables::OtelConfig;

/// A configuration that cannot be used; the process exits with code 64.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The flags over the file they name (`--config`), resolved.
pub fn load(args: ServeArgs) -> Result<Resolved, ConfigError> {
    load_from(args, &mut Disk::default())
}

/// [`load`], the file read through `disk` (what a reload notes as loaded is what it read).
pub(crate) fn load_from(args: ServeArgs, disk: &mut Disk) -> Result<Resolved, ConfigError> {
    let file = match &args.config {
        Some(path) => {
            let text = disk
                .read_to_string(path)
                .map_err(|e| ConfigError(format!("config {}: {e}", path.display())))?;
            let base = path.parent().unwrap_or(Path::new("."));
            FileConfig::parse(&text, base)
                .map_err(|e| ConfigError(format!("config {}: {e}", path.display())))?
        }
        None => FileConfig::default(),
    };
    let resolved = resolve(args, file)?;
    read_keys(&resolved, |path| disk.read_to_string(path))?;
    Ok(resolved)
}

/// The key set of `[auth] jwks_file`, read by `read` and put in force in the resolved
/// configuration's (nothing without one).
pub fn read_keys(
    resolved: &Resolved,
    read: impl FnOnce(&Path) -> std::io::Result<String>,
) -> Result<(), ConfigError> {
    if let (Some(auth), Some(path)) = (&resolved.edge.auth, &resolved.jwks_file) {
        let text = read(path)
            .map_err(|e| ConfigError(format!("[auth] jwks_file {}: {e}", path.display())))?;
        access::load_keys(auth, path, &text)?;
    }
    Ok(())
}
