//! The schema a snapshot serves: the files given (`schema_files`), merged with what the
//! upstreams' gRPC server reflection gives (issue 15 §1; the questions are `edge`'s,
//! `Upstreams::reflect`).
//!
//! The given files win: services they define are not asked for, and a reflected file with the
//! name of a given one is not used. Two upstreams giving one file name with different
//! contents is a conflict, named with both upstreams: the gateway cannot tell which is right.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use prost::Message as _;
use transcode::Schema;

use crate::config::{ConfigError, Resolved};
use crate::schema_files;

/// The schema `resolved` names, asking `upstreams`' reflection when it says so.
pub async fn load(resolved: &Resolved, upstreams: &edge::Upstreams) -> anyhow::Result<Schema> {
    let given = if resolved.schema.is_empty() {
        None
    } else {
        Some(schema_files::load(&resolved.schema)?)
    };
    let Some(reflection) = &resolved.reflection else {
        return given.ok_or_else(|| ConfigError("no schema given".into()).into());
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
    let reflected = upstreams
        .reflect(&query)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(merge(given.as_ref(), &reflected)?)
}

/// `given` (when there is one) and the reflected files as one schema.
fn merge(given: Option<&Schema>, reflected: &[edge::Reflected]) -> Result<Schema, ConfigError> {
    let mut files: BTreeMap<&str, (&Bytes, &str)> = BTreeMap::new();
    for upstream in reflected {
        for (name, bytes) in &upstream.files {
            match files.get(name.as_str()) {
                Some((other, from)) if *other != bytes => {
                    return Err(ConfigError(format!(
                        "the upstreams {from} and {} both give {name} by reflection, with different contents; give the file to the gateway (given files win) or serve one version",
                        upstream.upstream
                    )));
                }
                Some(_) => {}
                None => {
                    files.insert(name, (bytes, &upstream.upstream));
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
    let mut sets = Vec::new();
    if let Some(given) = given {
        // First: a file of a name seen before is skipped, so the given ones win.
        sets.push(given.to_descriptor_set());
    }
    sets.push(descriptor_set(&files).map_err(|e| {
        ConfigError(format!(
            "a file from the reflection of {} does not decode: {e}",
            upstreams()
        ))
    })?);
    let services: Vec<&str> = reflected
        .iter()
        .flat_map(|r| r.services.iter().map(String::as_str))
        .collect();
    if given.is_none() && services.is_empty() {
        return Err(ConfigError(format!(
            "the reflection of {} lists no service to serve",
            upstreams()
        )));
    }
    Schema::from_descriptor_sets(&sets).map_err(|e| {
        ConfigError(format!(
            "the schema from the reflection of {}: {e}",
            upstreams()
        ))
    })
}

/// A FileDescriptorSet of `files`, each after the files it imports, their bytes as given.
fn descriptor_set(files: &BTreeMap<&str, (&Bytes, &str)>) -> Result<Vec<u8>, prost::DecodeError> {
    let mut imports: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, (bytes, _)) in files {
        let file = prost_types::FileDescriptorProto::decode(bytes.as_ref())?;
        imports.insert(name, file.dependency);
    }
    let mut out = Vec::new();
    let mut placed = HashSet::new();
    // Depth first, each file after its imports (the upstream's imports are a DAG; a cycle
    // is placed once and left for the schema to refuse).
    fn place<'a>(
        name: &'a str,
        files: &BTreeMap<&'a str, (&Bytes, &str)>,
        imports: &'a BTreeMap<&str, Vec<String>>,
        placed: &mut HashSet<&'a str>,
        out: &mut Vec<u8>,
    ) {
        let Some((bytes, _)) = files.get(name) else {
            return;
        };
        if !placed.insert(name) {
            return;
        }
        for import in imports.get(name).into_iter().flatten() {
            place(import, files, imports, placed, out);
        }
        // FileDescriptorSet.file = 1, length-delimited.
        out.push(0x0a);
        prost::encoding::encode_varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }
    for name in files.keys() {
        place(name, files, &imports, &mut placed, &mut out);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, deps: &[&str], package: &str) -> Bytes {
        prost_types::FileDescriptorProto {
            name: Some(name.into()),
            package: Some(package.into()),
            dependency: deps.iter().map(|d| (*d).to_owned()).collect(),
            syntax: Some("proto3".into()),
            ..Default::default()
        }
        .encode_to_vec()
        .into()
    }

    #[test]
    fn files_come_after_their_imports() {
        let a = file("a.proto", &["b.proto"], "a");
        let b = file("b.proto", &["c.proto"], "b");
        let c = file("c.proto", &[], "c");
        let files: BTreeMap<&str, (&Bytes, &str)> = [
            ("a.proto", (&a, "u")),
            ("b.proto", (&b, "u")),
            ("c.proto", (&c, "u")),
        ]
        .into();
        let set =
            prost_types::FileDescriptorSet::decode(descriptor_set(&files).unwrap().as_slice())
                .unwrap();
        let names: Vec<&str> = set.file.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["c.proto", "b.proto", "a.proto"]);
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
