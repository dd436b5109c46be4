//! The REST-mapping backend: proto/test/rest/v1/library.proto served by tonic. Its answers
//! show what the gateway sent (Echo returns the request bytes untouched, unknown fields
//! included; UpdateBook returns the mask in `tags`), and its counters show what happened to
//! streams (how far a producer ran ahead, whether a call was cancelled, whether a client
//! stream was completed); a held WatchBooks call waits after its first book until the test
//! lets it go on.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tonic::codegen::tokio_stream::{self, Stream};
use tonic::{Request, Response, Status, Streaming};

/// The generated code of library.proto and the google.api messages it uses.
pub mod pb {
    pub mod library {
        pub mod v1 {
            tonic::include_proto!("library.v1");
        }
    }
    pub mod google {
        pub mod api {
            tonic::include_proto!("google.api");
        }
    }
}

use pb::google::api::HttpBody;
use pb::library::v1::library_server::{Library as LibraryService, LibraryServer};
use pb::library::v1::*;

/// What the backend saw of streams.
#[derive(Debug, Default)]
pub struct Stats {
    /// WatchBooks messages handed to tonic (the producer blocks when nobody reads).
    pub watch_sent: AtomicUsize,
    /// WatchBooks calls that ended because the receiver went away.
    pub watch_cancelled: AtomicUsize,
    /// ImportBooks calls that began (their handler ran).
    pub imports_started: AtomicUsize,
    /// Messages ImportBooks calls received.
    pub import_messages: AtomicUsize,
    /// ImportBooks calls that saw the end of their request stream.
    pub imports_completed: AtomicUsize,
    /// ImportBooks calls whose handler is over, however (a reset call's handler is dropped
    /// mid-await, so it sees no error).
    pub imports_ended: AtomicUsize,
    /// Chat calls whose handler is over (finished, failed or reset).
    pub chats_ended: AtomicUsize,
    /// Chat calls that saw the clean end of their request stream.
    pub chats_completed: AtomicUsize,
    /// Lets a held WatchBooks call (metadata `x-test-stream: hold`) go on past its first book.
    pub release: tokio::sync::Notify,
}

#[derive(Clone, Default)]
pub struct Library {
    pub stats: Arc<Stats>,
}

type BookStream = Pin<Box<dyn Stream<Item = Result<Book, Status>> + Send>>;

fn book(name: &str) -> Book {
    Book {
        name: name.to_owned(),
        title: format!("Title of {name}"),
        ..Book::default()
    }
}

#[tonic::async_trait]
impl LibraryService for Library {
    async fn get_book(&self, r: Request<GetBookRequest>) -> Result<Response<Book>, Status> {
        let name = r.into_inner().name;
        if name.ends_with("/missing") {
            return Err(Status::not_found(format!("no book {name}")));
        }
        Ok(Response::new(book(&name)))
    }

    async fn list_books(
        &self,
        r: Request<ListBooksRequest>,
    ) -> Result<Response<ListBooksResponse>, Status> {
        let r = r.into_inner();
        let books = (0..r.page_size.clamp(0, 100))
            .map(|i| book(&format!("{}/books/{i}", r.parent)))
            .collect();
        Ok(Response::new(ListBooksResponse {
            books,
            next_page_token: format!("after-{}", r.page_token),
        }))
    }

    async fn create_book(&self, r: Request<CreateBookRequest>) -> Result<Response<Book>, Status> {
        let r = r.into_inner();
        let mut b = r.book.unwrap_or_default();
        b.name = format!("{}/books/new", r.parent);
        if !r.request_id.is_empty() {
            b.labels.insert("request_id".into(), r.request_id);
        }
        Ok(Response::new(b))
    }

    async fn update_book(&self, r: Request<UpdateBookRequest>) -> Result<Response<Book>, Status> {
        let r = r.into_inner();
        let mut b = r.book.unwrap_or_default();
        b.tags = r.update_mask.map(|m| m.paths).unwrap_or_default();
        Ok(Response::new(b))
    }

    async fn delete_book(&self, r: Request<GetBookRequest>) -> Result<Response<Book>, Status> {
        Ok(Response::new(Book {
            name: r.into_inner().name,
            title: "deleted".into(),
            ..Book::default()
        }))
    }

    async fn archive_book(&self, r: Request<GetBookRequest>) -> Result<Response<Book>, Status> {
        Ok(Response::new(Book {
            name: r.into_inner().name,
            title: "archived".into(),
            ..Book::default()
        }))
    }

    async fn echo(
        &self,
        r: Request<ListBooksRequest>,
    ) -> Result<Response<ListBooksRequest>, Status> {
        Ok(Response::new(r.into_inner()))
    }

    async fn get_tags(&self, r: Request<GetBookRequest>) -> Result<Response<Book>, Status> {
        let name = r.into_inner().name;
        let tags = if name.ends_with("/none") {
            Vec::new()
        } else {
            vec!["sf".into(), "classic".into()]
        };
        Ok(Response::new(Book {
            tags,
            ..book(&name)
        }))
    }

    async fn get_published(&self, r: Request<GetBookRequest>) -> Result<Response<Book>, Status> {
        Ok(Response::new(Book {
            published: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            ..book(&r.into_inner().name)
        }))
    }

    async fn get_cover(&self, r: Request<GetBookRequest>) -> Result<Response<HttpBody>, Status> {
        Ok(Response::new(HttpBody {
            content_type: "image/png".into(),
            data: format!("\u{89}PNG cover of {}", r.into_inner().name).into_bytes(),
            extensions: Vec::new(),
        }))
    }

    async fn put_cover(&self, r: Request<PutCoverRequest>) -> Result<Response<HttpBody>, Status> {
        let r = r.into_inner();
        let cover = r.cover.unwrap_or_default();
        Ok(Response::new(HttpBody {
            content_type: "text/plain".into(),
            data: format!(
                "{}: {} bytes of {}",
                r.name,
                cover.data.len(),
                cover.content_type
            )
            .into_bytes(),
            extensions: Vec::new(),
        }))
    }

    async fn upload(&self, r: Request<HttpBody>) -> Result<Response<HttpBody>, Status> {
        let r = r.into_inner();
        Ok(Response::new(HttpBody {
            content_type: r.content_type,
            data: r.data.iter().rev().copied().collect(),
            extensions: Vec::new(),
        }))
    }

    type WatchBooksStream = BookStream;

    async fn watch_books(&self, r: Request<WatchRequest>) -> Result<Response<BookStream>, Status> {
        let hold = r
            .metadata()
            .get("x-test-stream")
            .is_some_and(|v| v == "hold");
        let r = r.into_inner();
        if r.fail_after < 0 {
            return Err(Status::failed_precondition("watch refused before any book"));
        }
        let interval = r
            .interval
            .map(|d| Duration::new(d.seconds.max(0) as u64, d.nanos.max(0) as u32))
            .unwrap_or_default();
        let stats = self.stats.clone();
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let padding = "x".repeat(r.title_bytes.max(0) as usize);
            for i in 0..r.count.max(0) {
                if r.fail_after > 0 && i == r.fail_after {
                    let _ = tx
                        .send(Err(Status::failed_precondition(format!(
                            "watch failed after {i} books"
                        ))))
                        .await;
                    return;
                }
                if !interval.is_zero() {
                    tokio::time::sleep(interval).await;
                }
                let b = Book {
                    name: format!("{}/books/{i}", r.parent),
                    title: padding.clone(),
                    pages: i64::from(i),
                    ..Book::default()
                };
                if tx.send(Ok(b)).await.is_err() {
                    stats.watch_cancelled.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                stats.watch_sent.fetch_add(1, Ordering::SeqCst);
                if hold && i == 0 {
                    tokio::select! {
                        () = stats.release.notified() => {}
                        () = tx.closed() => {
                            stats.watch_cancelled.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn import_books(
        &self,
        r: Request<Streaming<Book>>,
    ) -> Result<Response<ListBooksResponse>, Status> {
        let _ended = Ended(self.stats.clone(), |s| &s.imports_ended);
        self.stats.imports_started.fetch_add(1, Ordering::SeqCst);
        let mut input = r.into_inner();
        let mut books = Vec::new();
        loop {
            let message = input.message().await;
            if let Ok(Some(_)) = &message {
                self.stats.import_messages.fetch_add(1, Ordering::SeqCst);
            }
            match message {
                Ok(Some(b)) if b.title == "fail" => {
                    return Err(Status::invalid_argument(format!(
                        "book {} cannot be imported",
                        books.len()
                    )));
                }
                Ok(Some(b)) => books.push(b),
                Ok(None) => break,
                Err(e) => return Err(e),
            }
        }
        self.stats.imports_completed.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(ListBooksResponse {
            next_page_token: books.len().to_string(),
            books,
        }))
    }

    type ChatStream = BookStream;

    async fn chat(&self, r: Request<Streaming<Book>>) -> Result<Response<BookStream>, Status> {
        let mut input = r.into_inner();
        let stats = self.stats.clone();
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let _ended = Ended(stats.clone(), |s| &s.chats_ended);
            loop {
                let answer = match input.message().await {
                    Ok(Some(b)) if b.title == "fail" => {
                        Err(Status::aborted("chat failed on request"))
                    }
                    Ok(Some(b)) => Ok(Book {
                        title: b.title.to_uppercase(),
                        ..b
                    }),
                    Ok(None) => {
                        stats.chats_completed.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    Err(e) => Err(e),
                };
                let failed = answer.is_err();
                if tx.send(answer).await.is_err() || failed {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn unannotated(&self, r: Request<GetBookRequest>) -> Result<Response<Book>, Status> {
        Ok(Response::new(book(&r.into_inner().name)))
    }
}

/// Counts a handler as over when dropped: finished, failed or cancelled.
struct Ended(Arc<Stats>, fn(&Stats) -> &AtomicUsize);

impl Drop for Ended {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_add(1, Ordering::SeqCst);
    }
}

/// Serves Echo with a raw-bytes handler (prost would drop unknown fields), the rest with the
/// generated service.
#[derive(Clone)]
struct Dispatch(LibraryServer<Library>);

impl tower::Service<http::Request<tonic::body::Body>> for Dispatch {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        if req.uri().path() == "/library.v1.Library/Echo" {
            return Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(crate::BytesCodec);
                Ok(grpc.unary(crate::RawEcho, req).await)
            });
        }
        if req.uri().path() == "/library.v1.Library/WatchBooks"
            && req
                .headers()
                .get("x-test-stream")
                .is_some_and(|v| v == "broken-utf8")
        {
            return Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(crate::BytesCodec);
                Ok(grpc.server_streaming(BrokenUtf8Stream, req).await)
            });
        }
        let mut generated = self.0.clone();
        Box::pin(async move { tower::Service::call(&mut generated, req).await })
    }
}

/// WatchBooks asked for with metadata `x-test-stream: broken-utf8`: one good book, then a book
/// whose title is not UTF-8 (no JSON rendering exists for it), then one more good book.
struct BrokenUtf8Stream;

impl tonic::server::ServerStreamingService<bytes::Bytes> for BrokenUtf8Stream {
    type Response = bytes::Bytes;
    type ResponseStream =
        Pin<Box<dyn Stream<Item = Result<bytes::Bytes, Status>> + Send + 'static>>;
    type Future = std::future::Ready<Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, _: Request<bytes::Bytes>) -> Self::Future {
        // Field 2 (title), length-delimited.
        let good = bytes::Bytes::from_static(b"\x12\x04good");
        let broken = bytes::Bytes::from_static(b"\x12\x02\xff\xfe");
        let messages = vec![Ok(good.clone()), Ok(broken), Ok(good)];
        std::future::ready(Ok(Response::new(Box::pin(tokio_stream::iter(messages)))))
    }
}

impl tonic::server::NamedService for Dispatch {
    const NAME: &'static str = "library.v1.Library";
}

/// Starts the library backend on 127.0.0.1:0.
pub async fn start() -> (crate::Running, Arc<Stats>) {
    start_serving(false).await
}

/// Starts the library backend on 127.0.0.1:0; `gzip`: its answers go gzip-compressed and it
/// takes compressed requests.
pub async fn start_serving(gzip: bool) -> (crate::Running, Arc<Stats>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind library backend");
    let addr = listener.local_addr().expect("addr");
    let library = Library::default();
    let stats = library.stats.clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let mut server = LibraryServer::new(library);
    if gzip {
        use tonic::codec::CompressionEncoding::Gzip;
        server = server.send_compressed(Gzip).accept_compressed(Gzip);
    }
    let dispatch = Dispatch(server);
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(dispatch, incoming, async {
                let _ = stopped.await;
            })
            .await;
    });
    (crate::Running::new(addr, stop, task), stats)
}

/// The library backend with the real gateway (configured by `config`) in front of it.
pub struct Stack {
    pub backend: crate::Running,
    pub gw: crate::Running,
    pub stats: Arc<Stats>,
    /// The gateway itself: its metrics can be read without a request.
    pub edge: Arc<edge::Edge>,
}

/// Starts a [`Stack`], both servers on 127.0.0.1:0.
pub async fn start_with_gateway(config: edge::EdgeConfig) -> Stack {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind gateway");
    start_with_gateway_on(listener, config).await
}

/// Starts a [`Stack`] whose gateway serves on `listener` (its connections inherit the
/// listener's socket options, such as buffer sizes).
pub async fn start_with_gateway_on(listener: TcpListener, config: edge::EdgeConfig) -> Stack {
    let (backend, stats) = start().await;
    let upstreams = edge::Upstreams::new(
        Some(&format!("http://{}", backend.addr)),
        &[],
        config.max_response_bytes,
    )
    .expect("upstream URI");
    let (gw, edge) = crate::start_gateway_on(listener, schema(), upstreams, config);
    Stack {
        backend,
        gw,
        stats,
        edge,
    }
}

/// The gateway's schema for the library: proto/test/rest/v1/library.proto (its google/api
/// imports resolve from the copies bundled with transcode), compiled once per process.
pub fn schema() -> transcode::Schema {
    static SCHEMA: std::sync::OnceLock<transcode::Schema> = std::sync::OnceLock::new();
    SCHEMA
        .get_or_init(|| crate::compile_proto("test/rest/v1", "library.proto"))
        .clone()
}
