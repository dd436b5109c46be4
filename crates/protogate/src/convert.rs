//! `protogate convert`: one message from stdin to stdout, for crafting and reading bodies.

use std::io::{Read, Write};

use anyhow::Context as _;

use crate::cli::ConvertArgs;
use crate::config::ConfigError;
use crate::schema_files;

pub fn run(args: ConvertArgs) -> anyhow::Result<()> {
    if args.schema.descriptor_sets.is_empty() && args.schema.protos.is_empty() {
        return Err(ConfigError(
            "convert needs --descriptor-set FILE or --proto FILE (with -I DIR)".into(),
        )
        .into());
    }
    let schema = schema_files::load(&args.schema)?;
    let desc = schema
        .message(&args.message)
        .ok_or_else(|| ConfigError(format!("no message {} in the schema", args.message)))?;
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("reading stdin")?;
    let opts = transcode::Options {
        proto_field_names: args.proto_field_names,
        emit_defaults: args.emit_defaults,
        enum_numbers: args.enum_numbers,
        indent: args.indent,
        ignore_unknown_fields: args.ignore_unknown_fields,
        ..Default::default()
    };
    let (from, to) = (args.from.into(), args.to.into());
    let mut out = Vec::new();
    let findings = if from == to && from == transcode::Format::Protobuf {
        out.extend_from_slice(&input);
        transcode::Findings::default()
    } else {
        schema
            .convert(&desc, from, to, &input, &mut out, &opts)
            .with_context(|| {
                format!(
                    "converting {} from {} to {}",
                    args.message,
                    from.as_str(),
                    to.as_str()
                )
            })?
    };
    if findings.dropped_data() {
        eprintln!(
            "protogate: dropped data the schema does not know: {}",
            edge::downgrade::describe_dropped(&findings)
        );
    }
    for key in &findings.ignored_keys {
        eprintln!("protogate: ignored unknown key {key}");
    }
    if to == transcode::Format::Json {
        out.push(b'\n');
    }
    std::io::stdout()
        .write_all(&out)
        .context("writing stdout")?;
    Ok(())
}
