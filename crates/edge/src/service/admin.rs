//! The gateway's own endpoints: `/healthz`, `/readyz`, `/metrics`, `/admin/migration` and
//! `/admin/migration.json` (the admin endpoints: on the admin listener when there is one,
//! else on the main one) and the OpenAPI document (`openapi_path`, `/openapi.json` by default;
//! always on the main one). GET and HEAD only, answered before routing: their literal paths
//! beat any rule's template (as Envoy's matcher prefers literals), so `GET /{name}` serves
//! every other path; a rule whose own literal path is one of them is refused (`Edge::new`),
//! and another HTTP method on their paths goes to the rules when one takes it.

use super::*;

/// The admin endpoints' paths.
pub const ADMIN_PATHS: [&str; 6] = [
    "/healthz",
    "/readyz",
    "/metrics",
    MIGRATION_PAGE,
    MIGRATION_JSON,
    SCHEMA_JSON,
];
/// The schema in force: its digest, services, methods and routes.
const SCHEMA_JSON: &str = "/admin/schema";
/// The migration report as a page, and as JSON for scripts and `protogate report`; both take
/// `?method=GLOB` (`demo.shop.v1.Shop.*`).
const MIGRATION_PAGE: &str = "/admin/migration";
const MIGRATION_JSON: &str = "/admin/migration.json";

/// The paths the main listener answers itself, before routing.
pub(super) fn own_paths(config: &EdgeConfig) -> impl Iterator<Item = &str> {
    let admin: &[&'static str] = if config.admin_listener {
        &[]
    } else {
        &ADMIN_PATHS
    };
    admin.iter().copied().chain(config.openapi_path.as_deref())
}

impl Edge {
    /// Answers one of the gateway's own endpoints on the main listener, or `None` for a path
    /// that is not one of them.
    pub(super) async fn own_endpoint(
        &self,
        head: &http::request::Parts,
    ) -> Option<Result<Response<ResponseBody>, EdgeError>> {
        let path = head.uri.path();
        let openapi = self.config.openapi_path.as_deref() == Some(path);
        let admin = !self.config.admin_listener && ADMIN_PATHS.contains(&path);
        if !openapi && !admin {
            return None;
        }
        // Another HTTP method on an own path is a rule's, when one takes it.
        if !matches!(head.method, http::Method::GET | http::Method::HEAD)
            && !matches!(
                self.routes
                    .resolve(&self.schema, head.method.as_str(), path),
                transcode::rest::Resolution::NotFound
            )
        {
            return None;
        }
        if openapi {
            return Some(only_get(head).map(|()| {
                plain(
                    StatusCode::OK,
                    transcode::media::JSON[0],
                    self.openapi.clone(),
                )
            }));
        }
        self.admin_endpoint(head).await
    }

    /// The admin listener's one step: an admin endpoint, else 404.
    pub(super) async fn admin_only(
        &self,
        head: &http::request::Parts,
    ) -> Result<Response<ResponseBody>, EdgeError> {
        match self.admin_endpoint(head).await {
            Some(answer) => answer,
            None => Err(EdgeError::NotFound(format!(
                "the admin listener serves {} only",
                ADMIN_PATHS.join(", ")
            ))),
        }
    }

    async fn admin_endpoint(
        &self,
        head: &http::request::Parts,
    ) -> Option<Result<Response<ResponseBody>, EdgeError>> {
        let path = head.uri.path();
        if !ADMIN_PATHS.contains(&path) {
            return None;
        }
        if let Err(refused) = only_get(head) {
            return Some(Err(refused));
        }
        Some(Ok(match path {
            "/healthz" => plain(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ok\n"),
            ),
            "/readyz" => self.readyz().await,
            SCHEMA_JSON => plain(
                StatusCode::OK,
                transcode::media::JSON[0],
                Bytes::from(self.schema_document().to_string()),
            ),
            MIGRATION_PAGE | MIGRATION_JSON => {
                use crate::migration::{Origin, Views};
                let query = head.uri.query();
                let glob = method_glob(query);
                let now = std::time::SystemTime::now();
                let fleet = self.config.migration.fleet_prometheus.as_ref();
                // The page shows the fleet when it can; the document stays this gateway's
                // own unless asked (`protogate report` merges replicas' documents).
                let view = query_value(query, "view");
                let want_fleet = fleet.is_some()
                    && if path == MIGRATION_PAGE {
                        view.as_deref() != Some("local")
                    } else {
                        view.as_deref() == Some("fleet")
                    };
                let local = || {
                    self.migration.report_of(
                        &self.sunset,
                        glob.as_deref(),
                        now,
                        Origin::Instance(self.config.migration.instance.clone()),
                    )
                };
                let (report, views) = match fleet {
                    Some(url) if want_fleet => {
                        match self.fleet_report(url, glob.as_deref(), now).await {
                            Ok(report) => (report, Views::Fleet),
                            Err(e) if path == MIGRATION_JSON => {
                                return Some(Err(EdgeError::BadUpstreamAnswer(format!(
                                    "the fleet's view from Prometheus {}: {e}",
                                    url.text
                                ))));
                            }
                            Err(e) => (local(), Views::Local { error: Some(e) }),
                        }
                    }
                    Some(_) => (local(), Views::Local { error: None }),
                    None => (local(), Views::Alone),
                };
                if path == MIGRATION_PAGE {
                    let mut page = plain(
                        StatusCode::OK,
                        "text/html; charset=utf-8",
                        Bytes::from(crate::migration::render_html(&report, &views)),
                    );
                    // The page is self-contained and has no script: nothing may load from elsewhere or run.
                    page.headers_mut().insert(
                        header::CONTENT_SECURITY_POLICY,
                        HeaderValue::from_static(
                            "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
                        ),
                    );
                    page
                } else {
                    plain(
                        StatusCode::OK,
                        transcode::media::JSON[0],
                        Bytes::from(crate::migration::render_json(&report)),
                    )
                }
            }
            _ => {
                let series = self
                    .exported
                    .collect(&self.migration, self.config.migration.export);
                let (client_requests, client_downgrades) = crate::migration::samples(&series);
                plain(
                    StatusCode::OK,
                    crate::metrics::CONTENT_TYPE,
                    Bytes::from(self.metrics.render_with(&crate::metrics::Scraped {
                        client_requests: &client_requests,
                        client_downgrades: &client_downgrades,
                        process: self.config.process.and_then(|read| read()),
                        certificate_expiry: self.config.tls.as_ref().and_then(|t| t.not_after()),
                    })),
                )
            }
        }))
    }

    /// `/admin/schema`: the digest, each service with its upstream and methods, and every
    /// REST route, in the order the router tries them.
    fn schema_document(&self) -> serde_json::Value {
        use serde_json::json;
        let mut methods: Vec<&Method> = self.schema.methods().collect();
        methods.sort_by(|a, b| a.full_name.cmp(&b.full_name));
        let mut services: Vec<serde_json::Value> = Vec::new();
        for method in methods {
            let entry = json!({
                "name": method.full_name.rsplit('/').next().unwrap_or_default(),
                "path": &*method.path,
                "input": method.input.full_name(),
                "output": method.output.full_name(),
                "streaming": match method.streaming {
                    StreamingKind::Unary => "unary",
                    StreamingKind::ClientStreaming => "client",
                    StreamingKind::ServerStreaming => "server",
                    StreamingKind::Bidirectional => "bidirectional",
                },
            });
            match services.last_mut() {
                Some(last) if last["name"] == *method.service => {
                    if let Some(list) = last["methods"].as_array_mut() {
                        list.push(entry);
                    }
                }
                _ => services.push(json!({
                    "name": &*method.service,
                    "upstream": self.upstreams.uri(&method.service),
                    "methods": [entry],
                })),
            }
        }
        let routes: Vec<serde_json::Value> = self
            .routes
            .iter()
            .map(|route| {
                json!({
                    "http_method": route.rule.method,
                    "path": route.rule.path,
                    "method": &*route.method.full_name,
                    "body": route.rule.body,
                    "response_body": route.rule.response_body,
                })
            })
            .collect();
        json!({ "digest": &*self.digest, "services": services, "routes": routes })
    }

    /// The fleet's report from the per-client series in Prometheus at `url` (methods
    /// `glob` matches), with this gateway's sunset policy; an error says what failed.
    async fn fleet_report(
        &self,
        url: &crate::fetch::HttpUrl,
        glob: Option<&str>,
        now: std::time::SystemTime,
    ) -> Result<crate::migration::Report, String> {
        let mut report = crate::fetch::fleet_report(url, None, FLEET_AGENT, FLEET_TIMEOUT).await?;
        if let Some(glob) = glob {
            let glob = glob.replace('/', ".");
            report
                .methods
                .retain(|m| crate::migration::glob_match(glob.as_bytes(), m.method.as_bytes()));
        }
        for m in &mut report.methods {
            m.sunset = crate::migration::sunset_report(&self.sunset, &m.method, now);
        }
        Ok(report)
    }

    /// Ready when the schema is loaded (not while the start waits for an upstream's
    /// reflection) and the gateway is not shutting down; the upstreams only as `readyz_requires` says (by default not at
    /// all: one upstream down must not take every replica out of its Service, and with it
    /// every other service's traffic). The body lists every upstream's state either way.
    async fn readyz(&self) -> Response<ResponseBody> {
        use crate::config::ReadyzRequires;
        if self.is_draining() {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"not ready: shutting down\n"),
            );
        }
        let states = self.upstreams.readiness(Duration::from_secs(1)).await;
        let reachable = states.iter().filter(|(_, s)| s.is_ok()).count();
        let waiting =
            self.config.schema_waiting.as_ref().map(|why| {
                format!("no schema yet, the upstreams' reflection is asked again: {why}")
            });
        let unready = match self.config.readyz_requires {
            _ if waiting.is_some() => waiting.as_deref(),
            ReadyzRequires::None => None,
            ReadyzRequires::AnyUpstream if reachable == 0 && !states.is_empty() => {
                Some("no upstream is reachable (readyz_requires = \"any-upstream\")")
            }
            ReadyzRequires::AllUpstreams if reachable < states.len() => {
                Some("an upstream is unreachable (readyz_requires = \"all-upstreams\")")
            }
            ReadyzRequires::AnyUpstream | ReadyzRequires::AllUpstreams => None,
        };
        let mut text = match unready {
            Some(why) => format!("not ready: {why}\n"),
            None => "ready\n".to_owned(),
        };
        for (name, state) in &states {
            match state {
                Ok(()) => text.push_str(&format!("upstream {name}: reachable\n")),
                Err(why) => text.push_str(&format!("upstream {name}: unreachable: {why}\n")),
            }
        }
        let status = if unready.is_some() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        };
        plain(status, "text/plain; charset=utf-8", Bytes::from(text))
    }
}

/// The `method` query parameter (percent-decoded; `+` is a space), if any.
fn method_glob(query: Option<&str>) -> Option<String> {
    query_value(query, "method")
}

/// A query parameter's value (percent-decoded; `+` is a space), if any and not empty.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    let value = query?.split('&').find_map(|pair| {
        pair.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
    })?;
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

/// How long the page waits for Prometheus before showing this gateway's own view.
const FLEET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The User-Agent of the fleet view's queries.
const FLEET_AGENT: &str = concat!("protogate/", env!("CARGO_PKG_VERSION"), " (fleet view)");

/// 405 with `Allow: GET, HEAD` for any other method (hyper sends no body for HEAD).
fn only_get(head: &http::request::Parts) -> Result<(), EdgeError> {
    if matches!(head.method, http::Method::GET | http::Method::HEAD) {
        return Ok(());
    }
    Err(EdgeError::MethodNotAllowed {
        what: format!("path {}", head.uri.path()),
        allow: "GET, HEAD".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::method_glob;

    #[test]
    fn the_method_parameter_is_decoded() {
        assert_eq!(method_glob(None), None);
        assert_eq!(method_glob(Some("x=1")), None);
        assert_eq!(method_glob(Some("method=")), None);
        assert_eq!(
            method_glob(Some("a=b&method=demo.shop.v1.Shop.%2A")).as_deref(),
            Some("demo.shop.v1.Shop.*")
        );
        assert_eq!(method_glob(Some("method=a%2Fb")).as_deref(), Some("a/b"));
        assert_eq!(method_glob(Some("method=%zz%4")).as_deref(), Some("%zz%4"));
        // Not UTF-8 once decoded: no filter.
        assert_eq!(method_glob(Some("method=%ff")), None);
    }
}
