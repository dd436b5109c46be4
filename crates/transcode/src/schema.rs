//! Schemas: a loaded descriptor pool plus the method table the gateway routes by.
//!
//! Schemas come from a binary `FileDescriptorSet` or from `.proto` sources compiled in-process
//! with protox. This crate never touches the file system: the caller hands over the bytes, or a
//! function that returns the text of an imported file by its import name.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use prost::Message as _;
use prost_reflect::{DescriptorPool, MessageDescriptor, ServiceDescriptor};

/// The shape of a method's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingKind {
    Unary,
    ClientStreaming,
    ServerStreaming,
    Bidirectional,
}

/// A method of a service in the schema, addressed by its gRPC path `/pkg.Service/Method`.
#[derive(Debug, Clone)]
pub struct Method {
    /// `/pkg.Service/Method`.
    pub path: Arc<str>,
    /// `pkg.Service/Method`, the name used in logs and metric labels.
    pub full_name: Arc<str>,
    /// `pkg.Service`.
    pub service: Arc<str>,
    pub input: MessageDescriptor,
    pub output: MessageDescriptor,
    pub streaming: StreamingKind,
    /// Marked `option idempotency_level = NO_SIDE_EFFECTS`: safe to call with a GET
    /// (Connect's).
    pub no_side_effects: bool,
    pub descriptor: prost_reflect::MethodDescriptor,
}

type MethodMap = HashMap<Box<str>, Method, foldhash::fast::RandomState>;

/// A loaded schema. Cheap to clone; immutable once built.
#[derive(Clone)]
pub struct Schema {
    pool: DescriptorPool,
    /// By path; a fast hasher: the keys come from the schema, a lookup per request.
    methods: Arc<MethodMap>,
    /// The direct transcoder's per-message plans.
    plans: Arc<crate::direct::plan::Plans>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("methods", &self.methods.len())
            .finish()
    }
}

/// A schema that cannot be loaded; the message names the file and, where known, the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(String);

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaError {}

impl SchemaError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        SchemaError(message.into())
    }
}

impl Schema {
    /// Loads a binary `FileDescriptorSet` (`protoc -o`, `buf build`). Imports that the set does
    /// not include are resolved from the well-known types and `google/api` files bundled with
    /// this crate. Options (such as `google.api.http`) are kept as they were encoded.
    pub fn from_descriptor_set(bytes: &[u8]) -> Result<Schema, SchemaError> {
        Self::from_descriptor_sets(&[bytes.to_vec()])
    }

    /// Builds a schema from several descriptor sets (one per `--descriptor-set`); a file in
    /// more than one set is taken from the first.
    pub fn from_descriptor_sets(sets: &[Vec<u8>]) -> Result<Schema, SchemaError> {
        // Files are kept as their encoded bytes: decoding them into prost_types would drop
        // the extension options (HTTP rules) they carry.
        let mut files: Vec<(prost_types::FileDescriptorProto, &[u8])> = Vec::new();
        let mut present = std::collections::HashSet::new();
        for bytes in sets {
            let mut r = crate::wire::Reader::new(bytes, 0);
            let bad = |e: &dyn fmt::Display| SchemaError(format!("not a FileDescriptorSet: {e}"));
            while !r.is_empty() {
                let (number, wire_type) = r.tag().map_err(|e| bad(&e))?;
                if (number, wire_type) != (1, crate::wire::LEN) {
                    r.skip(number, wire_type, 100).map_err(|e| bad(&e))?;
                    continue;
                }
                let (raw, _) = r.len_delimited().map_err(|e| bad(&e))?;
                let file = prost_types::FileDescriptorProto::decode(raw).map_err(|e| bad(&e))?;
                if present.insert(file.name().to_owned()) {
                    files.push((file, raw));
                }
            }
        }
        // Sets built without `--include_imports` lack the well-known types they import: add
        // the bundled copies of any imported file that is missing.
        let missing: Vec<String> = files
            .iter()
            .flat_map(|(f, _)| f.dependency.iter())
            .filter(|d| !present.contains(*d))
            .cloned()
            .collect();
        let global = DescriptorPool::global();
        let mut extra: Vec<prost_types::FileDescriptorProto> = Vec::new();
        for name in &missing {
            let bundled = match global.get_file_by_name(name) {
                Some(file) => vec![file.file_descriptor_proto().clone()],
                None => compile_bundled(name),
            };
            for file in bundled {
                if present.insert(file.name().to_owned()) {
                    extra.push(file);
                }
            }
        }
        let mut set = Vec::new();
        for file in &extra {
            crate::wire::put_len_prefixed(&mut set, 1, &file.encode_to_vec());
        }
        for (_, raw) in &files {
            crate::wire::put_len_prefixed(&mut set, 1, raw);
        }
        let mut pool = DescriptorPool::new();
        pool.decode_file_descriptor_set(set.as_slice())
            .map_err(|e| SchemaError(describe_descriptor_error(&e)))?;
        Self::from_pool(pool)
    }

    /// Compiles `.proto` files in-process. `files` are import names (relative to an include
    /// directory); `open` returns the text of a file by its import name, or `None` when there is
    /// no such file. `google/protobuf/*.proto` resolve without being supplied.
    pub fn compile<F>(files: &[String], open: F) -> Result<Schema, SchemaError>
    where
        F: Fn(&str) -> Option<String> + 'static,
    {
        let texts: Arc<std::sync::Mutex<HashMap<String, String>>> = Default::default();
        let resolver = SourceResolver {
            open: Box::new(open),
            texts: texts.clone(),
        };
        let mut chain = protox::file::ChainFileResolver::new();
        chain.add(resolver);
        chain.add(BundledResolver);
        chain.add(protox::file::GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(chain);
        compiler.include_imports(true);
        for file in files {
            compiler
                .open_file(file)
                .map_err(|e| describe_protox_error(&e, &texts))?;
        }
        let pool = compiler.descriptor_pool();
        Self::from_pool(pool)
    }

    /// Wraps an already-built pool, adding the bundled `google/rpc` files (Status and the
    /// standard error details) unless the pool has its own.
    /// Fails if the pool holds a well-known type whose layout is not the standard one.
    pub fn from_pool(mut pool: DescriptorPool) -> Result<Schema, SchemaError> {
        add_google_rpc(&mut pool);
        check_well_known_types(&pool)?;
        let mut methods = MethodMap::default();
        for service in pool.services() {
            add_service_methods(&service, &mut methods);
        }
        let plans = Arc::new(crate::direct::plan::Plans::build(&pool));
        Ok(Schema {
            pool,
            methods: Arc::new(methods),
            plans,
        })
    }

    /// Looks a method up by its gRPC path `/pkg.Service/Method`. No allocation, no lock.
    pub fn method(&self, path: &str) -> Option<&Method> {
        self.methods.get(path)
    }

    /// Every method of every service, in no particular order.
    pub fn methods(&self) -> impl Iterator<Item = &Method> {
        self.methods.values()
    }

    /// Looks a message up by its full name (`pkg.Msg`).
    pub fn message(&self, full_name: &str) -> Option<MessageDescriptor> {
        self.pool.get_message_by_name(full_name)
    }

    /// The direct transcoder's plans (for the crate's own tests of its loops).
    #[cfg(test)]
    pub(crate) fn plans(&self) -> &crate::direct::plan::Plans {
        &self.plans
    }

    /// Converts `input` in format `from` to protobuf wire bytes of message `desc`, appended to
    /// `out`. Protobuf input is copied unchanged (pass-through never re-encodes). `desc`
    /// should come from this schema ([`Schema::message`], its methods): a descriptor of
    /// another pool is converted correctly but always by the slower reference path (the
    /// same holds for [`Schema::from_protobuf`]).
    pub fn to_protobuf(
        &self,
        desc: &MessageDescriptor,
        from: crate::Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &crate::Options,
    ) -> Result<crate::Findings, crate::Error> {
        self.traced_to_protobuf(desc, from, input, out, opts).0
    }

    /// [`Schema::to_protobuf`], also telling whether the direct path answered (true) or
    /// handed the message to the reference path. The one dispatch both use, so the tests that
    /// hold the direct path to a share of the answers measure what callers get.
    #[inline]
    fn traced_to_protobuf(
        &self,
        desc: &MessageDescriptor,
        from: crate::Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &crate::Options,
    ) -> (Result<crate::Findings, crate::Error>, bool) {
        if let Some(plan) = self.plans.index(desc) {
            let start = out.len();
            if crate::direct::to_protobuf(&self.plans, plan, from, input, out, opts).is_ok() {
                return (Ok(crate::Findings::default()), true);
            }
            out.truncate(start);
        }
        (
            crate::reference::to_protobuf(desc, from, input, out, opts),
            false,
        )
    }

    /// Renders protobuf wire bytes of message `desc` as `to`, appended to `out`, reporting
    /// the unknown fields the rendering dropped. Protobuf output is the input unchanged.
    pub fn from_protobuf(
        &self,
        desc: &MessageDescriptor,
        to: crate::Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &crate::Options,
    ) -> Result<crate::Findings, crate::Error> {
        self.traced_from_protobuf(desc, to, input, out, opts).0
    }

    /// [`Schema::from_protobuf`], also telling whether the direct path answered (see
    /// [`Schema::traced_to_protobuf`]).
    #[inline]
    fn traced_from_protobuf(
        &self,
        desc: &MessageDescriptor,
        to: crate::Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &crate::Options,
    ) -> (Result<crate::Findings, crate::Error>, bool) {
        if let Some(plan) = self.plans.index(desc) {
            let start = out.len();
            let mut findings = crate::Findings::default();
            if crate::direct::from_protobuf(&self.plans, plan, to, input, out, opts, &mut findings)
                .is_ok()
            {
                if opts.indent > 0 && to == crate::Format::Json {
                    crate::indent::reindent_tail(out, start, opts.indent);
                }
                return (Ok(findings), true);
            }
            out.truncate(start);
        }
        (
            crate::reference::from_protobuf(desc, to, input, out, opts),
            false,
        )
    }

    /// Checks that `input` is well-formed protobuf for message `desc` without decoding it
    /// (see [`crate::validate_protobuf`]). A cold path: the gateway checks a pass-through body
    /// only after the upstream failed on it.
    pub fn validate_protobuf(
        &self,
        desc: &MessageDescriptor,
        input: &[u8],
        opts: &crate::Options,
    ) -> Result<(), crate::Error> {
        crate::validate_protobuf(desc, input, opts)
    }

    /// What the direct path answered through the same dispatch as [`Schema::to_protobuf`] and
    /// [`Schema::from_protobuf`]: `None` where it handed over to the reference path. For tests
    /// that check the fast path is really taken.
    #[doc(hidden)]
    pub fn direct_only(
        &self,
        desc: &MessageDescriptor,
        from: crate::Format,
        to: crate::Format,
        input: &[u8],
        opts: &crate::Options,
    ) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let (result, direct) = match (from, to) {
            (from, crate::Format::Protobuf) => {
                self.traced_to_protobuf(desc, from, input, &mut out, opts)
            }
            (crate::Format::Protobuf, to) => {
                self.traced_from_protobuf(desc, to, input, &mut out, opts)
            }
            _ => return None,
        };
        (direct && result.is_ok()).then_some(out)
    }

    pub fn convert(
        &self,
        desc: &MessageDescriptor,
        from: crate::Format,
        to: crate::Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &crate::Options,
    ) -> Result<crate::Findings, crate::Error> {
        use crate::Format::Protobuf;
        if from == Protobuf || to == Protobuf {
            return if from == Protobuf {
                self.from_protobuf(desc, to, input, out, opts)
            } else {
                self.to_protobuf(desc, from, input, out, opts)
            };
        }
        let mut wire = Vec::new();
        let mut findings = self.to_protobuf(desc, from, input, &mut wire, opts)?;
        let more = self.from_protobuf(desc, to, &wire, out, opts)?;
        findings.unknown_fields.extend(more.unknown_fields);
        findings.unresolved_any.extend(more.unresolved_any);
        Ok(findings)
    }

    /// The underlying descriptor pool.
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    /// The schema as a `FileDescriptorSet` (all files, dependencies first).
    pub fn to_descriptor_set(&self) -> Vec<u8> {
        self.pool.encode_to_vec()
    }
}

/// The converters rely on the standard layout of the well-known types with a JSON form of
/// their own. A schema that brings its own, different copy of one is refused when it loads,
/// rather than failing on a request.
fn check_well_known_types(pool: &DescriptorPool) -> Result<(), SchemaError> {
    use prost_reflect::Kind;
    let scalar = |k: &Kind, want: &str| match k {
        Kind::Int64 => want == "int64",
        Kind::Int32 => want == "int32",
        Kind::String => want == "string",
        Kind::Bytes => want == "bytes",
        Kind::Double => want == "double",
        Kind::Message(m) => m.full_name() == want,
        Kind::Enum(e) => e.full_name() == want,
        _ => false,
    };
    let layouts: &[(&str, &[(u32, &str)])] = &[
        ("google.protobuf.Timestamp", &[(1, "int64"), (2, "int32")]),
        ("google.protobuf.Duration", &[(1, "int64"), (2, "int32")]),
        ("google.protobuf.FieldMask", &[(1, "string")]),
        ("google.protobuf.Any", &[(1, "string"), (2, "bytes")]),
        ("google.protobuf.ListValue", &[(1, "google.protobuf.Value")]),
        (
            "google.protobuf.Value",
            &[
                (1, "google.protobuf.NullValue"),
                (2, "double"),
                (3, "string"),
                (5, "google.protobuf.Struct"),
                (6, "google.protobuf.ListValue"),
            ],
        ),
    ];
    for (name, fields) in layouts {
        let Some(desc) = pool.get_message_by_name(name) else {
            continue;
        };
        for (number, want) in *fields {
            if !desc
                .get_field(*number)
                .is_some_and(|f| scalar(&f.kind(), want))
            {
                return Err(SchemaError(format!(
                    "{}: {name} does not have the standard layout (field {number} should be {want})",
                    desc.parent_file().name()
                )));
            }
        }
    }
    if let Some(s) = pool.get_message_by_name("google.protobuf.Struct") {
        let ok = s.get_field(1).is_some_and(|f| {
            f.is_map()
                && matches!(f.kind(), Kind::Message(e)
                    if matches!(e.map_entry_value_field().kind(), Kind::Message(v) if v.full_name() == "google.protobuf.Value"))
        });
        if !ok {
            return Err(SchemaError(format!(
                "{}: google.protobuf.Struct does not have the standard layout (field 1 should be map<string, Value>)",
                s.parent_file().name()
            )));
        }
    }
    for m in pool.all_messages() {
        if crate::encode::is_wrapper(&m) && m.get_field(1).is_none() {
            return Err(SchemaError(format!(
                "{}: wrapper {} has no field 1 (value)",
                m.parent_file().name(),
                m.full_name()
            )));
        }
    }
    Ok(())
}

/// Bundled `.proto` files: `google/rpc` (error bodies are google.rpc.Status; always added) and
/// `google/api` (HTTP rules and HttpBody; added when a schema imports them).
const BUNDLED: &[(&str, &str)] = &[
    (
        "google/rpc/status.proto",
        include_str!("../proto/google/rpc/status.proto"),
    ),
    (
        "google/rpc/error_details.proto",
        include_str!("../proto/google/rpc/error_details.proto"),
    ),
    (
        "google/api/http.proto",
        include_str!("../proto/google/api/http.proto"),
    ),
    (
        "google/api/annotations.proto",
        include_str!("../proto/google/api/annotations.proto"),
    ),
    (
        "google/api/httpbody.proto",
        include_str!("../proto/google/api/httpbody.proto"),
    ),
];

/// A bundled file and the files it imports, compiled; empty when `name` is not bundled.
fn compile_bundled(name: &str) -> Vec<prost_types::FileDescriptorProto> {
    let mut chain = protox::file::ChainFileResolver::new();
    chain.add(BundledResolver);
    chain.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(chain);
    compiler.include_imports(true);
    match compiler.open_file(name) {
        Ok(compiler) => compiler.file_descriptor_set().file,
        Err(_) => Vec::new(),
    }
}

fn add_google_rpc(pool: &mut DescriptorPool) {
    for (name, _) in BUNDLED.iter().filter(|(n, _)| n.starts_with("google/rpc/")) {
        if pool.get_file_by_name(name).is_some() {
            continue;
        }
        for file in compile_bundled(name) {
            if pool.get_file_by_name(file.name()).is_none() {
                // A user file that defines the same messages under another name wins: on a
                // conflict the pool stays as it was.
                let mut candidate = pool.clone();
                if candidate.add_file_descriptor_proto(file).is_ok() {
                    *pool = candidate;
                }
            }
        }
    }
}

struct BundledResolver;

impl protox::file::FileResolver for BundledResolver {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match BUNDLED.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => protox::file::File::from_source(n, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn add_service_methods(service: &ServiceDescriptor, out: &mut MethodMap) {
    for m in service.methods() {
        let full_name: Arc<str> = format!("{}/{}", service.full_name(), m.name()).into();
        let path: Arc<str> = format!("/{full_name}").into();
        let streaming = match (m.is_client_streaming(), m.is_server_streaming()) {
            (false, false) => StreamingKind::Unary,
            (true, false) => StreamingKind::ClientStreaming,
            (false, true) => StreamingKind::ServerStreaming,
            (true, true) => StreamingKind::Bidirectional,
        };
        let method = Method {
            path: path.clone(),
            full_name,
            service: service.full_name().into(),
            input: m.input(),
            output: m.output(),
            streaming,
            no_side_effects: no_side_effects(&m),
            descriptor: m.clone(),
        };
        out.insert(path.as_ref().into(), method);
    }
}

/// Whether a method's options say `idempotency_level = NO_SIDE_EFFECTS` (field 34 of
/// google.protobuf.MethodOptions, value 1).
fn no_side_effects(m: &prost_reflect::MethodDescriptor) -> bool {
    let options = m.options();
    options
        .get_field_by_number(34)
        .and_then(|v| v.as_enum_number())
        == Some(1)
}

type OpenFn = dyn Fn(&str) -> Option<String>;

struct SourceResolver {
    open: Box<OpenFn>,
    /// Texts handed to the compiler, kept to turn error offsets into line numbers.
    texts: Arc<std::sync::Mutex<HashMap<String, String>>>,
}

impl protox::file::FileResolver for SourceResolver {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match (self.open)(name) {
            Some(text) => {
                // Kept before parsing: a parse error's offset needs the text too.
                if let Ok(mut texts) = self.texts.lock() {
                    texts.insert(name.to_owned(), text.clone());
                }
                protox::file::File::from_source(name, &text)
            }
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn describe_protox_error(
    e: &protox::Error,
    texts: &std::sync::Mutex<HashMap<String, String>>,
) -> SchemaError {
    let file = e.file().unwrap_or("<input>").to_owned();
    let offset = first_label_offset(e);
    let mut where_ = file.clone();
    if let (Some(offset), Ok(texts)) = (offset, texts.lock())
        && let Some(text) = texts.get(&file)
    {
        let (line, col) = crate::error::line_col(text, offset);
        where_ = format!("{file}:{line}:{col}");
    }
    SchemaError(format!("{where_}: {e}"))
}

fn describe_descriptor_error(e: &prost_reflect::DescriptorError) -> String {
    match e.file() {
        Some(file) => format!("{file}: {e}"),
        None => e.to_string(),
    }
}

/// The source offset a diagnostic (or the diagnostic it wraps) points at.
fn first_label_offset(d: &dyn miette::Diagnostic) -> Option<usize> {
    if let Some(offset) = d.labels().and_then(|mut l| l.next()).map(|l| l.offset()) {
        return Some(offset);
    }
    if let Some(offset) = d.diagnostic_source().and_then(first_label_offset) {
        return Some(offset);
    }
    d.related().and_then(|mut r| r.find_map(first_label_offset))
}
