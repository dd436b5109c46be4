//! A grpc-gateway set-up as protogate keys. grpc-gateway is configured in Go code, so its
//! options come from a small TOML file named after what its `main.go` passes — the
//! `--grpc-server-endpoint` flag of its examples, protojson's `MarshalOptions` /
//! `UnmarshalOptions` of `runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{…})`,
//! and the names its `WithIncomingHeaderMatcher` / `WithOutgoingHeaderMatcher` let through —
//! or from the same options as flags of `protogate import --grpc-gateway`.

use std::path::PathBuf;

use serde::Deserialize;

use super::{Imported, strings};
use crate::cli::ImportArgs;

/// The grpc-gateway options file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayFile {
    /// The gRPC server the gateway dials.
    pub grpc_server_endpoint: Option<String>,
    /// The server is dialed with TLS (`credentials.NewTLS`), not `insecure`.
    pub tls: Option<bool>,
    /// `http.ListenAndServe`'s address.
    pub listen: Option<String>,
    #[serde(default)]
    pub descriptor_sets: Vec<PathBuf>,
    #[serde(default)]
    pub protos: Vec<PathBuf>,
    #[serde(default)]
    pub includes: Vec<PathBuf>,
    /// protojson.MarshalOptions.
    pub emit_unpopulated: Option<bool>,
    pub emit_default_values: Option<bool>,
    pub use_proto_names: Option<bool>,
    pub use_enum_numbers: Option<bool>,
    pub indent: Option<String>,
    pub multiline: Option<bool>,
    pub allow_partial: Option<bool>,
    /// protojson.UnmarshalOptions.
    pub discard_unknown: Option<bool>,
    /// What WithIncomingHeaderMatcher / WithOutgoingHeaderMatcher pass: names, or prefixes
    /// ending in `*`.
    #[serde(default)]
    pub incoming_headers: Vec<String>,
    #[serde(default)]
    pub outgoing_headers: Vec<String>,
    /// Other ServeMux options the gateway is built with (`WithErrorHandler`, …), named so
    /// that the output says what becomes of them.
    #[serde(default)]
    pub mux_options: Vec<String>,
}

impl GatewayFile {
    pub fn parse(text: &str) -> Result<GatewayFile, String> {
        toml::from_str(text).map_err(|e| e.message().to_owned())
    }

    /// The file's options with the command line's over them.
    pub fn with_flags(mut self, args: &ImportArgs) -> GatewayFile {
        let on = |flag: bool, was: Option<bool>| if flag { Some(true) } else { was };
        self.grpc_server_endpoint = args
            .grpc_server_endpoint
            .clone()
            .or(self.grpc_server_endpoint);
        self.listen = args.listen.clone().or(self.listen);
        self.emit_unpopulated = on(args.emit_unpopulated, self.emit_unpopulated);
        self.emit_default_values = on(args.emit_default_values, self.emit_default_values);
        self.use_proto_names = on(args.use_proto_names, self.use_proto_names);
        self.use_enum_numbers = on(args.use_enum_numbers, self.use_enum_numbers);
        self.multiline = on(args.multiline, self.multiline);
        self.discard_unknown = on(args.discard_unknown, self.discard_unknown);
        self.indent = args.indent.clone().or(self.indent);
        self.incoming_headers
            .extend(args.incoming_headers.iter().cloned());
        self.outgoing_headers
            .extend(args.outgoing_headers.iter().cloned());
        self.descriptor_sets
            .extend(args.schema.descriptor_sets.iter().cloned());
        self.protos.extend(args.schema.protos.iter().cloned());
        self.includes.extend(args.schema.includes.iter().cloned());
        self
    }
}

/// The protogate configuration of a grpc-gateway set-up.
pub fn import(g: GatewayFile) -> Result<Imported, String> {
    let mut out = Imported::default();
    let endpoint = g.grpc_server_endpoint.as_deref().ok_or(
        "grpc_server_endpoint (--grpc-server-endpoint): the gRPC server the gateway dials",
    )?;
    if let Some(listen) = &g.listen {
        out.set("listen", listen.as_str());
    }
    let scheme = if g.tls == Some(true) { "https" } else { "http" };
    let endpoint = endpoint.strip_prefix("dns:///").unwrap_or(endpoint);
    out.set("upstream", format!("{scheme}://{endpoint}"));
    let paths = |p: &[PathBuf]| {
        strings(
            &p.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>(),
        )
    };
    if !g.descriptor_sets.is_empty() {
        out.set("descriptor_sets", paths(&g.descriptor_sets));
    }
    if !g.protos.is_empty() {
        out.set("protos", paths(&g.protos));
    }
    if !g.includes.is_empty() {
        out.set("includes", paths(&g.includes));
    }
    if g.descriptor_sets.is_empty() && g.protos.is_empty() {
        out.not_carried(
            "the schema: grpc-gateway compiles it in; give protogate the .proto files (protos, includes) or a descriptor set (descriptor_sets), or schema_source = \"reflection\"",
        );
    }
    if g.emit_default_values == Some(true) {
        out.set_in("json", "emit_unpopulated", true);
    }
    if g.emit_unpopulated == Some(true) {
        out.set_in("json", "emit_unpopulated", true);
        out.not_carried(
            "EmitUnpopulated also prints unset message fields and oneofs as null; protogate prints the fields without presence (as EmitDefaultValues does)",
        );
    }
    if g.use_proto_names == Some(true) {
        out.set_in("json", "use_proto_names", true);
    }
    if g.use_enum_numbers == Some(true) {
        out.set_in("json", "enums_as_ints", true);
    }
    match (&g.indent, g.multiline == Some(true)) {
        (Some(indent), _) if !indent.is_empty() => {
            if indent.bytes().all(|b| b == b' ') && indent.len() <= 8 {
                out.set_in("json", "indent", indent.len() as i64);
            } else {
                out.not_carried(format!(
                    "Indent {indent:?}: protogate indents by 1 to 8 spaces"
                ));
            }
        }
        // Multiline without an indent: protojson's two spaces.
        (_, true) => out.set_in("json", "indent", 2),
        _ => {}
    }
    if g.allow_partial == Some(true) {
        out.built_in("AllowPartial: proto3 messages have no required fields to miss");
    }
    if g.discard_unknown == Some(true) {
        out.not_carried(
            "DiscardUnknown: protogate refuses a JSON field the message does not have (400 naming it)",
        );
    }
    if !g.incoming_headers.is_empty() {
        out.set("forward_headers", strings(&g.incoming_headers));
    }
    if !g.outgoing_headers.is_empty() {
        out.set("forward_response_headers", strings(&g.outgoing_headers));
    }
    out.built_in(
        "DefaultHeaderMatcher: Grpc-Metadata-* request headers reach the upstream as metadata, and its answers' metadata comes back as Grpc-Metadata-*",
    );
    out.not_carried(
        "streams: grpc-gateway frames each message as a {\"result\": …} line; protogate sends the messages themselves (a JSON array, or NDJSON/SSE by [json] stream or Accept)",
    );
    for option in &g.mux_options {
        match option.as_str() {
            "WithHealthzEndpoint" => out.built_in("WithHealthzEndpoint: /healthz and /readyz"),
            "WithMetadata" => out.built_in(
                "WithMetadata: forward_headers, and x-protogate-client for a verified caller",
            ),
            other => out.not_carried(format!("ServeMux option {other}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marshaler_options_and_header_matchers_map_to_keys() {
        let file = GatewayFile::parse(
            "grpc_server_endpoint = \"localhost:9090\"\nlisten = \":8081\"\nprotos = [\"api/v1/shop.proto\"]\nincludes = [\"api\"]\n\
             emit_unpopulated = true\nuse_proto_names = true\nuse_enum_numbers = true\nindent = \"    \"\n\
             discard_unknown = true\nincoming_headers = [\"x-tenant\", \"x-feature-*\"]\noutgoing_headers = [\"x-ratelimit-*\"]\n\
             mux_options = [\"WithErrorHandler\", \"WithHealthzEndpoint\"]\n",
        )
        .unwrap();
        let out = import(file).unwrap();
        let text = out.render("gw.toml");
        let t: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(t["upstream"].as_str(), Some("http://localhost:9090"));
        assert_eq!(t["listen"].as_str(), Some(":8081"));
        assert_eq!(t["json"]["indent"].as_integer(), Some(4));
        assert_eq!(t["json"]["enums_as_ints"].as_bool(), Some(true));
        assert_eq!(t["json"]["use_proto_names"].as_bool(), Some(true));
        assert_eq!(t["json"]["emit_unpopulated"].as_bool(), Some(true));
        assert_eq!(t["forward_headers"].as_array().unwrap().len(), 2);
        assert_eq!(
            t["forward_response_headers"][0].as_str(),
            Some("x-ratelimit-*")
        );
        for named in [
            "EmitUnpopulated",
            "DiscardUnknown",
            "WithErrorHandler",
            "{\"result\"",
        ] {
            assert!(
                out.not_carried.iter().any(|n| n.contains(named)),
                "{named}: {text}"
            );
        }
        assert!(
            out.built_in
                .iter()
                .any(|n| n.contains("WithHealthzEndpoint"))
        );
        // The result is a configuration protogate reads.
        crate::check_config(&text.replace(":8081", "127.0.0.1:0")).unwrap();
    }

    #[test]
    fn flags_over_the_file_and_what_is_required() {
        let args = ImportArgs {
            grpc_server_endpoint: Some("dns:///shop:50051".into()),
            multiline: true,
            use_enum_numbers: true,
            incoming_headers: vec!["x-a".into()],
            ..ImportArgs::default()
        };
        let file = GatewayFile::parse(
            "grpc_server_endpoint = \"other:1\"\nincoming_headers = [\"x-b\"]\ntls = true\n",
        )
        .unwrap();
        let out = import(file.with_flags(&args)).unwrap();
        assert_eq!(
            out.get("upstream").and_then(|v| v.as_str()),
            Some("https://shop:50051")
        );
        assert_eq!(
            out.get_in("json", "indent").and_then(|v| v.as_integer()),
            Some(2)
        );
        assert_eq!(
            out.get("forward_headers")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(out.not_carried.iter().any(|n| n.contains("the schema")));
        let e = import(GatewayFile::default()).unwrap_err();
        assert!(e.contains("grpc_server_endpoint"), "{e}");
        let e = GatewayFile::parse("emit_unpopulatd = true").unwrap_err();
        assert!(e.contains("emit_unpopulatd"), "{e}");
        let tabs = GatewayFile {
            grpc_server_endpoint: Some("h:1".into()),
            indent: Some("\t".into()),
            ..GatewayFile::default()
        };
        assert!(
            import(tabs)
                .unwrap()
                .not_carried
                .iter()
                .any(|n| n.contains("Indent"))
        );
    }
}
