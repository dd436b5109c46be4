//! The schema from the upstreams' gRPC server reflection: each upstream's
//! `grpc.reflection.v1.ServerReflection` (or `v1alpha`, when v1 is unimplemented) lists its
//! services and gives the files that define them, then every file those import, by name,
//! until the set is closed. The calls go through the upstream's pool: its endpoints, TLS
//! and balancing apply as to any call.
//!
//! Each question is a stream of its own (one request, one answer): servers answer a question
//! they cannot (a file they do not have) by ending the stream with an error (tonic) or with
//! an `error_response` on it (grpc-go), and one stream per question reads both the same way.
//! The questions of a round go out together on the pool's connections.
//!
//! What comes back is the files' bytes as the upstream encoded them — their options (the
//! HTTP rules) intact; the binary builds the schema from them (`transcode` does no I/O and
//! this crate no schema logic).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message as _;
use tonic::{Code, Status};

use super::{Route, StreamCodec, Upstreams, method_path, request};

const V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
const V1ALPHA: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
/// More rounds of imports than any real schema has: a server that keeps naming new files
/// (a cycle the server made up) is cut off.
const MAX_ROUNDS: usize = 64;

/// What to ask the upstreams.
#[derive(Clone, Debug, Default)]
pub struct ReflectionQuery {
    /// Every upstream lists its services (`schema_source = "reflection"`).
    pub list_all: bool,
    /// Services asked of their own upstream (a service's `reflect = true`).
    pub services: Vec<String>,
    /// Services not to fetch: the files given to the gateway define them, and they win.
    pub skip: HashSet<String>,
    /// How long one upstream may take to answer everything.
    pub timeout: Duration,
}

/// What one upstream's reflection service gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Reflected {
    /// The upstream, as logs and metrics name it (its URLs).
    pub upstream: Arc<str>,
    /// The services taken from it: those whose calls go to it.
    pub services: Vec<String>,
    /// The files defining them and every file they import (transitively), by name. Imports
    /// the upstream does not have are left out when they are `google/protobuf/` or
    /// `google/api/` files (the schema brings its own copies).
    pub files: BTreeMap<String, ReflectedFile>,
}

/// One file as the upstream encoded it (a `FileDescriptorProto`, options intact), and the
/// names of the files it imports.
#[derive(Clone, Debug, PartialEq)]
pub struct ReflectedFile {
    pub bytes: Bytes,
    pub imports: Vec<String>,
}

impl Upstreams {
    /// Asks the upstreams `query` names for their schemas: one [`Reflected`] per upstream,
    /// in the order of their names, or the first failure, naming the upstream.
    pub async fn reflect(&self, query: &ReflectionQuery) -> Result<Vec<Reflected>, String> {
        // The distinct upstreams, and what to ask each.
        let mut asks: Vec<(&Route, Ask)> = Vec::new();
        if query.list_all {
            for route in self.default.iter().chain(self.by_service.values()) {
                ask_of(&mut asks, route).list = true;
            }
        }
        for service in query.services.iter().filter(|s| !query.skip.contains(*s)) {
            let route = self.route(service).map_err(|s| s.message().to_owned())?;
            ask_of(&mut asks, route).services.insert(service.clone());
        }
        let calls = asks
            .iter()
            .map(|(route, ask)| self.reflect_one(route, ask, query));
        let mut out = futures_util::future::try_join_all(calls).await?;
        out.sort_by(|a, b| a.upstream.cmp(&b.upstream));
        Ok(out)
    }

    async fn reflect_one(
        &self,
        route: &Route,
        ask: &Ask,
        query: &ReflectionQuery,
    ) -> Result<Reflected, String> {
        let name = route.pool.name.clone();
        let session = Session {
            route,
            max_response_bytes: self.max_response_bytes,
        };
        let work = async {
            let (path, listed) = session.list().await?;
            let mut services = ask.services.clone();
            if ask.list {
                for service in listed {
                    let routed_here = self
                        .route(&service)
                        .is_ok_and(|r| Arc::ptr_eq(&r.pool, &route.pool));
                    if routed_here && !query.skip.contains(&service) && !is_reflection(&service) {
                        services.insert(service);
                    }
                }
            }
            let files = session.files(path, &services).await?;
            Ok::<_, String>(Reflected {
                upstream: name.clone(),
                services: services.into_iter().collect(),
                files,
            })
        };
        match tokio::time::timeout(query.timeout, work).await {
            Ok(Ok(reflected)) => Ok(reflected),
            Ok(Err(e)) => Err(format!("upstream {name}: reflection: {e}")),
            Err(_) => Err(format!(
                "upstream {name}: reflection did not answer within {:?}",
                query.timeout
            )),
        }
    }
}

/// What to ask one upstream.
#[derive(Debug, Default)]
struct Ask {
    list: bool,
    services: BTreeSet<String>,
}

/// The questions for `route`'s upstream (routes to one pool share them).
fn ask_of<'r, 'a>(asks: &'a mut Vec<(&'r Route, Ask)>, route: &'r Route) -> &'a mut Ask {
    let at = match asks
        .iter()
        .position(|(r, _)| Arc::ptr_eq(&r.pool, &route.pool))
    {
        Some(at) => at,
        None => {
            asks.push((route, Ask::default()));
            asks.len() - 1
        }
    };
    &mut asks[at].1
}

fn is_reflection(service: &str) -> bool {
    service.starts_with("grpc.reflection.")
}

/// Imports the schema has copies of when an upstream lacks them.
fn bundled(file: &str) -> bool {
    file.starts_with("google/protobuf/") || file.starts_with("google/api/")
}

/// The questions to one upstream.
struct Session<'a> {
    route: &'a Route,
    max_response_bytes: usize,
}

impl Session<'_> {
    /// The services the upstream lists, and the path of its reflection service: v1, or
    /// v1alpha when it does not implement v1.
    async fn list(&self) -> Result<(&'static str, Vec<String>), String> {
        let mut answer = self.ask(V1, Question::ListServices(String::new())).await;
        let mut path = V1;
        if matches!(&answer, Err(status) if status.code() == Code::Unimplemented) {
            path = V1ALPHA;
            answer = self
                .ask(V1ALPHA, Question::ListServices(String::new()))
                .await;
            if let Err(status) = &answer
                && status.code() == Code::Unimplemented
            {
                return Err(format!(
                    "the upstream serves neither grpc.reflection.v1 nor v1alpha ({})",
                    status.message()
                ));
            }
        }
        match answer {
            Ok(Answer::Services(list)) => {
                Ok((path, list.service.into_iter().map(|s| s.name).collect()))
            }
            Ok(_) => Err("list_services answered with something else".to_owned()),
            Err(status) => Err(format!("list_services: {}", describe(&status))),
        }
    }

    /// The files defining `services` and everything they import.
    async fn files(
        &self,
        path: &str,
        services: &BTreeSet<String>,
    ) -> Result<BTreeMap<String, ReflectedFile>, String> {
        let mut files = BTreeMap::new();
        let mut questions: Vec<Question> = services
            .iter()
            .map(|s| Question::FileContainingSymbol(s.clone()))
            .collect();
        for _ in 0..MAX_ROUNDS {
            if questions.is_empty() {
                return Ok(files);
            }
            let answers =
                futures_util::future::join_all(questions.iter().map(|q| self.ask(path, q.clone())))
                    .await;
            let mut imports = BTreeSet::new();
            for (question, answer) in questions.iter().zip(answers) {
                let got = match answer {
                    Ok(Answer::Files(got)) => got,
                    Ok(_) => return Err(format!("{question} answered with something else")),
                    Err(status) => match question {
                        Question::FileByFilename(name)
                            if status.code() == Code::NotFound && bundled(name) =>
                        {
                            continue;
                        }
                        _ => return Err(format!("{question}: {}", describe(&status))),
                    },
                };
                for raw in got.file_descriptor_proto {
                    let head = FileHead::decode(raw.clone()).map_err(|e| {
                        format!("{question} gave a file that is not a FileDescriptorProto: {e}")
                    })?;
                    if let std::collections::btree_map::Entry::Vacant(slot) = files.entry(head.name)
                    {
                        imports.extend(head.dependency.iter().cloned());
                        slot.insert(ReflectedFile {
                            bytes: raw,
                            imports: head.dependency,
                        });
                    }
                }
            }
            questions = imports
                .into_iter()
                .filter(|name| !files.contains_key(name))
                .map(Question::FileByFilename)
                .collect();
        }
        Err(format!(
            "the imports did not close after {MAX_ROUNDS} rounds of questions"
        ))
    }

    /// One question on a stream of its own; its one answer, or the status the stream ended
    /// with (an `error_response` is read as that status).
    async fn ask(&self, path: &str, question: Question) -> Result<Answer, Status> {
        let message = Request {
            host: String::new(),
            question: Some(question),
        }
        .encode_to_vec();
        let requests = futures_util::stream::iter([Some(Bytes::from(message))]);
        // Uncompressed whatever `upstream_compression` says: reflection services rarely take
        // compressed requests (tonic-reflection does not).
        let mut grpc =
            tonic::client::Grpc::new(super::stream::PoolService(self.route.pool.clone()))
                .max_decoding_message_size(self.max_response_bytes)
                .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
        let response = grpc
            .streaming(
                request(requests, http::HeaderMap::new(), None),
                method_path(path)?,
                StreamCodec,
            )
            .await?;
        let mut stream = response.into_inner();
        let Some(bytes) = stream.message().await? else {
            return Err(Status::unknown("the stream ended without an answer"));
        };
        let answer = Response::decode(bytes)
            .map_err(|e| Status::internal(format!("an answer that does not decode: {e}")))?;
        match answer.answer {
            Some(Answer::Error(error)) => Err(Status::new(
                Code::from_i32(error.error_code),
                error.error_message,
            )),
            Some(answer) => Ok(answer),
            None => Err(Status::internal("an empty answer")),
        }
    }
}

fn describe(status: &Status) -> String {
    if super::made_by_gateway(status) {
        status.message().to_owned()
    } else {
        format!("{:?}: {}", status.code(), status.message())
    }
}

impl std::fmt::Display for Question {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Question::FileByFilename(name) => write!(f, "file_by_filename {name}"),
            Question::FileContainingSymbol(name) => write!(f, "file_containing_symbol {name}"),
            Question::ListServices(_) => f.write_str("list_services"),
        }
    }
}

// The reflection protocol's messages (grpc/reflection/v1/reflection.proto; v1alpha's are the
// same), as far as the gateway asks and reads them.

/// `ServerReflectionRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(oneof = "Question", tags = "3, 4, 7")]
    question: Option<Question>,
}

/// `ServerReflectionRequest.message_request`, the questions the gateway asks.
#[derive(Clone, PartialEq, prost::Oneof)]
enum Question {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
    /// Its content is not used by the server.
    #[prost(string, tag = "7")]
    ListServices(String),
}

/// `ServerReflectionResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct Response {
    #[prost(oneof = "Answer", tags = "4, 6, 7")]
    answer: Option<Answer>,
}

/// `ServerReflectionResponse.message_response`.
#[derive(Clone, PartialEq, prost::Oneof)]
enum Answer {
    #[prost(message, tag = "4")]
    Files(FileDescriptorResponse),
    #[prost(message, tag = "6")]
    Services(ListServiceResponse),
    #[prost(message, tag = "7")]
    Error(ErrorResponse),
}

#[derive(Clone, PartialEq, prost::Message)]
struct FileDescriptorResponse {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    file_descriptor_proto: Vec<Bytes>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ListServiceResponse {
    #[prost(message, repeated, tag = "1")]
    service: Vec<ServiceResponse>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServiceResponse {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ErrorResponse {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// The head of a `FileDescriptorProto`: its name and imports (the rest is skipped).
#[derive(Clone, PartialEq, prost::Message)]
struct FileHead {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, repeated, tag = "3")]
    dependency: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_encode_as_the_protocol_has_them() {
        let encode = |q: Question| {
            Request {
                host: String::new(),
                question: Some(q),
            }
            .encode_to_vec()
        };
        // list_services = 7 (a string in the .proto; empty), file_by_filename = 3,
        // file_containing_symbol = 4.
        assert_eq!(encode(Question::ListServices(String::new())), [0x3a, 0]);
        assert_eq!(
            encode(Question::FileByFilename("a.proto".into())),
            b"\x1a\x07a.proto"
        );
        assert_eq!(
            encode(Question::FileContainingSymbol("p.S".into())),
            b"\x22\x03p.S"
        );
    }

    #[test]
    fn an_error_response_reads_as_its_code() {
        let bytes = Response {
            answer: Some(Answer::Error(ErrorResponse {
                error_code: 5,
                error_message: "file 'x' not found".into(),
            })),
        }
        .encode_to_vec();
        let Some(Answer::Error(e)) = Response::decode(bytes.as_slice()).unwrap().answer else {
            panic!("an error response")
        };
        assert_eq!(Code::from_i32(e.error_code), Code::NotFound);
    }
}
