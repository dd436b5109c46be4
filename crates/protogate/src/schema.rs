//! The schema a snapshot serves: the files given (`schema_files`), merged with what the
//! upstreams' gRPC server reflection gives (the questions are `edge`'s,
//! `Upstreams::reflect`).
//!
//! The given files win: services they define are not asked for, and a reflected file with the
//! name of a given one is not used. Two upstreams giving one file name with different
//! contents is a conflict, named with both upstreams: the gateway cannot tell which is right.

use std::collections::{BTreeMap, HashSet};

use transcode::Schema;

use crate::config::{ConfigError, Resolved};
use crate::disk::Disk;
use crate::schema_files;

/// The schema `resolved` names, its files read through `disk`, asking `upstreams`'
/// reflection when it says so.
pub async fn load(
    resolved: &Resolved,
    upstreams: &edge::Upstreams,
    disk: &mut Disk,
) -> anyhow::Result<Schema> {
    match load_at_start(resolved, upstreams, disk).await? {
        AtStart::Ready(schema) => Ok(schema),
        AtStart::Waiting { why, .. } => Err(anyhow::Error::msg(why)),
    }
}

/// What the gateway can serve when it starts.
pub enum AtStart {
    Ready(Schema),
    /// An upstream's reflection did not answer (`why`): the gateway waits for it, serving
    /// the given files meanwhile (`given`), if any.
    Waiting {
        given: Option<Schema>,
        why: String,
    },
}

/// As [`load`], but an upstream whose reflection does not answer is not an error: the start
/// waits for it (run.rs). Files that do not load and reflected schemas that do not fit
/// together are errors all the same.
pub async fn load_at_start(
    resolved: &Resolved,
    upstreams: &edge::Upstreams,
    disk: &mut Disk,
) -> anyhow::Result<AtStart> {
    let given = if resolved.schema.is_empty() {
        None
    } else {
        Some(schema_files::load_from(&resolved.schema, disk)?)
    };
    let Some(reflection) = &resolved.reflection else {
        return Ok(AtStart::Ready(
            given.ok_or_else(|| ConfigError("no schema given".into()))?,
        ));
    };
    let skip: HashSet<String> = given
        .iter()
        .flat_map(|schema| schema.methods().map(|m| m.service.to_string()))
        .collect();
    let query = edge::ReflectionQuery {
        list_all: reflection.all,
        services: reflection.services.clone(),
        skip,
        timeout: resolved.edge.upstream_timeout,
    };
    match upstreams.reflect(&query).await {
        Ok(reflected) => Ok(AtStart::Ready(merge(given.as_ref(), &reflected)?)),
        Err(why) => Ok(AtStart::Waiting { given, why }),
    }
}

/// `given` (when there is one) and the reflected files as one schema.
fn merge(given: Option<&Schema>, reflected: &[edge::Reflected]) -> Result<Schema, ConfigError> {
    let mut files: BTreeMap<&str, (&edge::ReflectedFile, &str)> = BTreeMap::new();
    for upstream in reflected {
        for (name, file) in &upstream.files {
            match files.get(name.as_str()) {
                Some((other, from)) if other.bytes != file.bytes => {
                    return Err(ConfigError(format!(
                        "the upstreams {from} and {} both give {name} by reflection, with different contents; give the file to the gateway (given files win) or serve one version",
                        upstream.upstream
                    )));
                }
                Some(_) => {}
                None => {
                    files.insert(name, (file, &upstream.upstream));
                }
            }
        }
    }
    let upstreams = || {
        reflected
            .iter()
            .map(|r| &*r.upstream)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if given.is_none() && reflected.iter().all(|r| r.services.is_empty()) {
        return Err(ConfigError(format!(
            "the reflection of {} lists no service to serve",
            upstreams()
        )));
    }
    let mut sets = Vec::new();
    if let Some(given) = given {
        // First: a file of a name seen before is skipped, so the given ones win.
        sets.push(given.to_descriptor_set());
    }
    sets.push(descriptor_set(&files));
    Schema::from_descriptor_sets(&sets).map_err(|e| {
        ConfigError(format!(
            "the schema from the reflection of {}: {e}",
            upstreams()
        ))
    })
}

/// A FileDescriptorSet of `files`, each after the files it imports, their bytes as given.
/// Depth first without recursion: an upstream decides how deep its imports go. A file is
/// marked when first reached, so an import cycle places each file once (and the schema then
/// refuses the cycle, naming it).
fn descriptor_set(files: &BTreeMap<&str, (&edge::ReflectedFile, &str)>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut reached: HashSet<&str> = HashSet::new();
    for &root in files.keys() {
        // (a file, how many of its imports are placed)
        let mut stack: Vec<(&str, usize)> = vec![(root, 0)];
        while let Some((name, next)) = stack.pop() {
            let Some((file, _)) = files.get(name) else {
                continue;
            };
            if next == 0 && !reached.insert(name) {
                continue;
            }
            match file.imports.get(next) {
                Some(import) => {
                    stack.push((name, next + 1));
                    stack.push((import, 0));
                }
                None => {
                    // FileDescriptorSet.file = 1, length-delimited.
                    out.push(0x0a);
                    prost::encoding::encode_varint(file.bytes.len() as u64, &mut out);
                    out.extend_from_slice(&file.bytes);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;

    fn file(name: &str, imports: &[&str], package: &str) -> edge::ReflectedFile {
        let imports: Vec<String> = imports.iter().map(|d| (*d).to_owned()).collect();
        let bytes = prost_types::FileDescriptorProto {
            name: Some(name.into()),
            package: Some(package.into()),
            dependency: imports.clone(),
            syntax: Some("proto3".into()),
            ..Default::default()
        }
        .encode_to_vec()
        .into();
        edge::ReflectedFile { bytes, imports }
    }

    fn names(set: &[u8]) -> Vec<String> {
        let set = prost_types::FileDescriptorSet::decode(set).unwrap();
        set.file.iter().map(|f| f.name().to_owned()).collect()
    }

    #[test]
    fn files_come_after_their_imports() {
        let a = file("a.proto", &["b.proto"], "a");
        let b = file("b.proto", &["c.proto"], "b");
        let c = file("c.proto", &[], "c");
        let files: BTreeMap<&str, (&edge::ReflectedFile, &str)> = [
            ("a.proto", (&a, "u")),
            ("b.proto", (&b, "u")),
            ("c.proto", (&c, "u")),
        ]
        .into();
        assert_eq!(
            names(&descriptor_set(&files)),
            ["c.proto", "b.proto", "a.proto"]
        );
    }

    #[test]
    fn a_deep_or_cyclic_import_chain_is_placed_without_recursion() {
        // 100,000 files each importing the next: a recursive walk overflowed the stack.
        let chain: Vec<(String, edge::ReflectedFile)> = (0..100_000)
            .map(|i| {
                let name = format!("f{i}.proto");
                let next = format!("f{}.proto", i + 1);
                (name.clone(), file(&name, &[&next], "p"))
            })
            .collect();
        let files: BTreeMap<&str, (&edge::ReflectedFile, &str)> = chain
            .iter()
            .map(|(name, file)| (name.as_str(), (file, "u")))
            .collect();
        let placed = names(&descriptor_set(&files));
        assert_eq!(placed.len(), 100_000);
        assert_eq!(placed[0], "f99999.proto");
        // A cycle: each file once.
        let a = file("a.proto", &["b.proto"], "a");
        let b = file("b.proto", &["a.proto"], "b");
        let files: BTreeMap<&str, (&edge::ReflectedFile, &str)> =
            [("a.proto", (&a, "u")), ("b.proto", (&b, "u"))].into();
        assert_eq!(names(&descriptor_set(&files)), ["b.proto", "a.proto"]);
    }

    #[test]
    fn one_file_two_contents_from_two_upstreams_is_a_conflict_naming_both() {
        let reflected = |upstream: &str, package: &str| edge::Reflected {
            upstream: upstream.into(),
            services: vec![],
            files: [("x.proto".to_owned(), file("x.proto", &[], package))].into(),
        };
        let e = merge(
            None,
            &[
                reflected("http://a:1", "one"),
                reflected("http://b:2", "two"),
            ],
        )
        .unwrap_err();
        assert!(
            e.0.contains("http://a:1") && e.0.contains("http://b:2") && e.0.contains("x.proto"),
            "{e}"
        );
        // The same contents from both are one file.
        let e = merge(
            None,
            &[
                reflected("http://a:1", "one"),
                reflected("http://b:2", "one"),
            ],
        )
        .unwrap_err();
        assert!(e.0.contains("lists no service"), "{e}");
    }
}
