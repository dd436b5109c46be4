//! The gateway's own endpoints: `/healthz`, `/readyz`, `/metrics` (the admin endpoints: on
//! the admin listener when there is one, else on the main one) and `/openapi.json` (always on
//! the main one). GET and HEAD only; answered before routing, so a REST rule may not take one
//! of their paths on the same listener (`Edge::new` refuses it).

use super::*;

/// The admin endpoints' paths.
pub(crate) const ADMIN_PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];
/// The API description, on the main listener.
pub(crate) const OPENAPI_PATH: &str = "/openapi.json";

/// The paths the main listener answers itself, before routing.
pub(super) fn own_paths(config: &EdgeConfig) -> impl Iterator<Item = &'static str> {
    let admin: &[&'static str] = if config.admin_listener {
        &[]
    } else {
        &ADMIN_PATHS
    };
    admin.iter().copied().chain([OPENAPI_PATH])
}

impl Edge {
    /// Answers one of the gateway's own endpoints on the main listener, or `None` for a path
    /// that is not one of them.
    pub(super) async fn own_endpoint<B>(&self, req: &Request<B>) -> Option<Response<ResponseBody>> {
        let path = req.uri().path();
        if path == OPENAPI_PATH {
            return Some(only_get(req).unwrap_or_else(|| {
                plain(
                    StatusCode::OK,
                    transcode::media::JSON[0],
                    self.openapi.clone(),
                )
            }));
        }
        if self.config.admin_listener {
            return None;
        }
        self.admin_endpoint(req).await
    }

    /// Serves one request on the admin listener: an admin endpoint, else 404.
    pub async fn handle_admin<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody> {
        match self.admin_endpoint(&req).await {
            Some(mut response) => {
                self.compress(req.headers(), &mut response);
                response
            }
            None => plain(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                Bytes::from(format!(
                    "not found: the admin listener serves {}\n",
                    ADMIN_PATHS.join(", ")
                )),
            ),
        }
    }

    async fn admin_endpoint<B>(&self, req: &Request<B>) -> Option<Response<ResponseBody>> {
        let path = req.uri().path();
        if !ADMIN_PATHS.contains(&path) {
            return None;
        }
        if let Some(refused) = only_get(req) {
            return Some(refused);
        }
        Some(match path {
            "/healthz" => plain(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ok\n"),
            ),
            "/readyz" => self.readyz().await,
            _ => plain(
                StatusCode::OK,
                crate::metrics::CONTENT_TYPE,
                Bytes::from(self.metrics.render()),
            ),
        })
    }

    /// Ready when the schema is loaded (it is, or we would not be serving), the gateway is
    /// not shutting down, and every upstream accepts a TCP connection.
    async fn readyz(&self) -> Response<ResponseBody> {
        if self.is_draining() {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"not ready: shutting down\n"),
            );
        }
        let problems = self.upstreams.unreachable(Duration::from_secs(1)).await;
        if problems.is_empty() {
            plain(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ready\n"),
            )
        } else {
            let text = format!("not ready: upstream unreachable: {}\n", problems.join("; "));
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from(text),
            )
        }
    }
}

/// 405 with `Allow: GET, HEAD` for any other method (hyper sends no body for HEAD).
fn only_get<B>(req: &Request<B>) -> Option<Response<ResponseBody>> {
    if matches!(*req.method(), http::Method::GET | http::Method::HEAD) {
        return None;
    }
    let mut r = plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{} accepts GET and HEAD only\n", req.uri().path())),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    Some(r)
}
