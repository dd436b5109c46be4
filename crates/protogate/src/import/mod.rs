//! `protogate import`: an Envoy gRPC-JSON transcoder set-up ([`envoy`]) or a grpc-gateway one
//! ([`grpc_gateway`]) read and printed as the protogate.toml that serves the same requests.
//! Every option that has no protogate equivalent is named at the top of the output (and
//! counted on stderr); options protogate has built in are listed too, so that nothing of the
//! source is passed over in silence.

pub mod envoy;
pub mod grpc_gateway;

use std::fmt::Write as _;

use anyhow::Context as _;

use crate::cli::ImportArgs;
use crate::config::ConfigError;

/// A configuration being made: its top-level keys and tables in the order they were set, and
/// what could not be carried over.
#[derive(Debug, Default)]
pub struct Imported {
    top: Vec<(String, toml::Value)>,
    tables: Vec<(String, Vec<(String, toml::Value)>)>,
    /// Options of the source with no protogate equivalent, each naming the option.
    pub not_carried: Vec<String>,
    /// Options of the source protogate does without a key (built in, or its default).
    pub built_in: Vec<String>,
}

impl Imported {
    /// Sets a top-level key (a second setting replaces the first).
    pub(crate) fn set(&mut self, key: &str, value: impl Into<toml::Value>) {
        put(&mut self.top, key, value.into());
    }

    /// Sets `key` in the table `[name]` (made on first use).
    pub(crate) fn set_in(&mut self, name: &str, key: &str, value: impl Into<toml::Value>) {
        let at = match self.tables.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                self.tables.push((name.to_owned(), Vec::new()));
                self.tables.len() - 1
            }
        };
        put(&mut self.tables[at].1, key, value.into());
    }

    /// A top-level key's value, if set.
    pub fn get(&self, key: &str) -> Option<&toml::Value> {
        self.top.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A key of the table `[name]`, if set.
    pub fn get_in(&self, name: &str, key: &str) -> Option<&toml::Value> {
        let (_, keys) = self.tables.iter().find(|(n, _)| n == name)?;
        keys.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn not_carried(&mut self, what: impl Into<String>) {
        self.not_carried.push(what.into());
    }

    pub(crate) fn built_in(&mut self, what: impl Into<String>) {
        self.built_in.push(what.into());
    }

    /// The configuration file: a header naming `source`, the options not carried over and
    /// those built in as comments, then the keys and tables.
    pub fn render(&self, source: &str) -> String {
        let mut out = format!("# protogate.toml imported from {source} by `protogate import`.\n");
        let list = |out: &mut String, title: &str, items: &[String]| {
            if items.is_empty() {
                return;
            }
            let _ = writeln!(out, "#\n# {title}:");
            for item in items {
                let mut first = true;
                for line in wrap(item, 90) {
                    let _ = writeln!(out, "#{} {line}", if first { " -" } else { "  " });
                    first = false;
                }
            }
        };
        list(&mut out, "Not carried over", &self.not_carried);
        list(&mut out, "Built in (no key needed)", &self.built_in);
        out.push('\n');
        for (key, value) in &self.top {
            let _ = writeln!(out, "{} = {value}", bare_or_quoted(key));
        }
        for (name, keys) in &self.tables {
            let _ = writeln!(out, "\n[{name}]");
            for (key, value) in keys {
                let _ = writeln!(out, "{} = {value}", bare_or_quoted(key));
            }
        }
        out
    }
}

fn put(keys: &mut Vec<(String, toml::Value)>, key: &str, value: toml::Value) {
    match keys.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => keys.push((key.to_owned(), value)),
    }
}

/// A TOML key as written: bare when it may be, else quoted.
fn bare_or_quoted(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}

/// A `[services."name"]` table's name.
pub(crate) fn service_table(name: &str) -> String {
    format!("services.{}", toml::Value::String(name.to_owned()))
}

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// A list of strings as a TOML array.
pub(crate) fn strings<S: AsRef<str>>(items: &[S]) -> toml::Value {
    toml::Value::Array(
        items
            .iter()
            .map(|s| toml::Value::String(s.as_ref().to_owned()))
            .collect(),
    )
}

/// Runs `protogate import`: the configuration on stdout, the count of options not carried
/// over on stderr.
pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let (imported, source) = match (&args.envoy, &args.grpc_gateway) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let imported = envoy::import(&text)
                .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
            (imported, path.display().to_string())
        }
        (None, Some(path)) => {
            let (file, source) = match path {
                None => (
                    grpc_gateway::GatewayFile::default(),
                    "the command line".to_owned(),
                ),
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    let file = grpc_gateway::GatewayFile::parse(&text)
                        .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
                    (file, path.display().to_string())
                }
            };
            let imported = grpc_gateway::import(file.with_flags(&args))
                .map_err(|e| ConfigError(format!("{source}: {e}")))?;
            (imported, source)
        }
        (None, None) => {
            return Err(
                ConfigError("import needs --envoy FILE or --grpc-gateway [FILE]".into()).into(),
            );
        }
    };
    print!("{}", imported.render(&source));
    if !imported.not_carried.is_empty() {
        eprintln!(
            "protogate import: {} option(s) of {source} not carried over, named at the top of the output",
            imported.not_carried.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_keys_tables_and_notes() {
        let mut i = Imported::default();
        i.set("listen", "0.0.0.0:8080");
        i.set("upstream", strings(&["http://a:1", "http://b:1"]));
        i.set_in("json", "indent", 2);
        i.set_in(&service_table("p.S"), "timeout", "2s");
        i.set_in("json", "indent", 4);
        i.not_carried("a long note that goes on and on and on about an option that protogate does not have at all, so it wraps");
        i.built_in("auto_mapping");
        let text = i.render("envoy.yaml");
        assert!(
            text.starts_with("# protogate.toml imported from envoy.yaml"),
            "{text}"
        );
        assert!(
            text.contains("# Not carried over:\n# - a long note"),
            "{text}"
        );
        // Wrapped at 90 characters, continued under the dash.
        assert!(
            text.contains(" does not have at\n#   all, so it wraps\n"),
            "{text}"
        );
        assert!(
            text.contains("# Built in (no key needed):\n# - auto_mapping\n"),
            "{text}"
        );
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["listen"].as_str(), Some("0.0.0.0:8080"));
        assert_eq!(parsed["upstream"].as_array().unwrap().len(), 2);
        assert_eq!(parsed["json"]["indent"].as_integer(), Some(4));
        assert_eq!(parsed["services"]["p.S"]["timeout"].as_str(), Some("2s"));
        assert_eq!(
            i.get_in(&service_table("p.S"), "timeout")
                .and_then(|v| v.as_str()),
            Some("2s")
        );
    }
}
