//! Reading schemas from disk for `transcode`, which never touches files itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use transcode::Schema;

use crate::cli::SchemaArgs;
use crate::config::ConfigError;
use crate::disk::Disk;

/// Loads the schema named by descriptor sets and/or `.proto` files.
pub fn load(args: &SchemaArgs) -> anyhow::Result<Schema> {
    load_from(args, &mut Disk::default())
}

/// [`load`], the descriptor sets and the `.proto` files named read through `disk` (the files
/// they import, which are not watched, from the include directories).
pub fn load_from(args: &SchemaArgs, disk: &mut Disk) -> anyhow::Result<Schema> {
    if !args.descriptor_sets.is_empty() && !args.protos.is_empty() {
        return Err(ConfigError("give either --descriptor-set or --proto, not both".into()).into());
    }
    if !args.descriptor_sets.is_empty() {
        let mut sets = Vec::new();
        for path in &args.descriptor_sets {
            let bytes = disk
                .read(path)
                .map_err(|e| ConfigError(format!("descriptor set {}: {e}", path.display())))?;
            sets.push(bytes);
        }
        let names: Vec<String> = args
            .descriptor_sets
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        return Schema::from_descriptor_sets(&sets).map_err(|e| {
            ConfigError(format!("loading descriptor set {}: {e}", names.join(", "))).into()
        });
    }
    let includes: Vec<PathBuf> = if args.includes.is_empty() {
        // Without -I, each file's own directory is the include directory.
        let mut dirs: Vec<PathBuf> = args
            .protos
            .iter()
            .map(|p| p.parent().unwrap_or(Path::new(".")).to_path_buf())
            .collect();
        dirs.dedup();
        dirs
    } else {
        args.includes.clone()
    };
    let mut names = Vec::new();
    // The files named, by the name they are compiled (and imported) by, as `disk` holds them.
    let mut named = HashMap::new();
    for proto in &args.protos {
        let name = import_name(proto, &includes)?;
        if let Ok(text) = disk.read_to_string(proto) {
            named.insert(name.clone(), text);
        }
        names.push(name);
    }
    let dirs = includes.clone();
    Schema::compile(&names, move |name| {
        named.get(name).cloned().or_else(|| {
            dirs.iter()
                .find_map(|dir| std::fs::read_to_string(dir.join(name)).ok())
        })
    })
    .map_err(|e| ConfigError(format!("compiling {}: {e}", names_list(&args.protos))).into())
}

fn names_list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name a `.proto` file is imported by: its path relative to the include directory it
/// sits in, or the path itself when it is already relative to one.
fn import_name(proto: &Path, includes: &[PathBuf]) -> Result<String, ConfigError> {
    let canonical = proto.canonicalize().ok();
    for dir in includes {
        if let (Some(file), Ok(dir)) = (&canonical, dir.canonicalize())
            && let Ok(rel) = file.strip_prefix(&dir)
        {
            return Ok(rel.to_string_lossy().replace('\\', "/"));
        }
        if proto.is_relative() && dir.join(proto).is_file() {
            return Ok(proto.to_string_lossy().replace('\\', "/"));
        }
    }
    if canonical.is_none() {
        return Err(ConfigError(format!("{}: no such file", proto.display())));
    }
    Err(ConfigError(format!(
        "{} is not under any include directory ({}); add -I DIR",
        proto.display(),
        names_list(includes)
    )))
}
