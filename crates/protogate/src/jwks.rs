//! `[auth] jwks_url`: the token keys fetched over https — at start, every `jwks_refresh`, and
//! when a token names a key the set lacks (the edge asks, at most once per `jwks_refresh`:
//! `edge::auth::Jwks::refetch`). A fetch that fails keeps the keys in force and is tried
//! again sooner (1 s, doubling, up to `jwks_refresh`); each failure is a warning.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use edge::auth::{Jwks, KeySet};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::{Request, StatusCode, Uri, header};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use crate::config::{ConfigError, JwksSource};

/// The largest key set read.
const MAX_BYTES: usize = 1 << 20;
/// One fetch's time, connection to the last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The fetcher of one key set.
pub struct Fetcher {
    source: JwksSource,
    uri: Uri,
    tls: Arc<ClientConfig>,
    keys: Arc<Jwks>,
}

impl Fetcher {
    /// A fetcher for `source` into `keys`; a CA file that cannot be read is a configuration
    /// error.
    pub fn new(source: JwksSource, keys: Arc<Jwks>) -> Result<Fetcher, ConfigError> {
        let whose = format!("[auth] jwks_url {:?}", source.url);
        let roots = crate::tls::root_store(source.ca.as_deref(), &whose, "jwks_ca")?;
        let tls = ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ConfigError(format!("{whose}: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let uri: Uri = source
            .url
            .parse()
            .map_err(|e| ConfigError(format!("{whose}: {e}")))?;
        Ok(Fetcher {
            source,
            uri,
            tls: Arc::new(tls),
            keys,
        })
    }

    /// One fetch; the keys put in force when it succeeds.
    pub async fn fetch_once(&self) -> anyhow::Result<usize> {
        let body = tokio::time::timeout(FETCH_TIMEOUT, self.get())
            .await
            .map_err(|_| anyhow!("no answer within {FETCH_TIMEOUT:?}"))??;
        let (set, skipped) = KeySet::parse(&body).map_err(|e| anyhow!(e))?;
        for why in &skipped {
            tracing::warn!(url = %self.source.url, "a key of the key set is left out: {why}");
        }
        if set.is_empty() {
            bail!("the key set holds no key tokens can be verified with");
        }
        let n = set.len();
        self.keys.store(set);
        Ok(n)
    }

    /// Fetches until the process ends: every `jwks_refresh`, when a token asks, and sooner
    /// after a failure.
    pub async fn run(self, mut fetched_before: bool) {
        let mut retry = Duration::from_secs(1);
        loop {
            let wait = if fetched_before {
                self.source.refresh
            } else {
                retry.min(self.source.refresh)
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.keys.wanted() => {}
            }
            match self.fetch_once().await {
                Ok(n) => {
                    tracing::debug!(url = %self.source.url, keys = n, "token keys fetched");
                    fetched_before = true;
                    retry = Duration::from_secs(1);
                }
                Err(e) => {
                    tracing::warn!(url = %self.source.url, error = %format!("{e:#}"), "cannot fetch the token keys; the keys in force stay");
                    fetched_before = false;
                    retry = (retry * 2).min(self.source.refresh);
                }
            }
        }
    }

    async fn get(&self) -> anyhow::Result<Bytes> {
        let host = self.uri.host().context("the URL has no host")?;
        let port = self.uri.port_u16().unwrap_or(443);
        let tcp = tokio::net::TcpStream::connect((
            host.trim_start_matches('[').trim_end_matches(']'),
            port,
        ))
        .await
        .with_context(|| format!("cannot connect to {host}:{port}"))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
        )
        .context("the host is no DNS name or IP address")?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls))
            .connect(name, tcp)
            .await
            .context("TLS")?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .context("starting HTTP/1.1")?;
        let conn = tokio::spawn(conn);
        let path = self.uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = self.uri.authority().map_or(host, |a| a.as_str());
        let request = Request::get(path)
            .header(header::HOST, authority)
            .header(header::ACCEPT, "application/jwk-set+json, application/json")
            .header(
                header::USER_AGENT,
                concat!("protogate/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::<Bytes>::new())
            .context("building the request")?;
        let response = sender.send_request(request).await.context("no answer")?;
        if response.status() != StatusCode::OK {
            conn.abort();
            bail!("answered {}", response.status());
        }
        let body = Limited::new(response.into_body(), MAX_BYTES)
            .collect()
            .await
            .map_err(|e| anyhow!("reading the key set: {e}"))?
            .to_bytes();
        conn.abort();
        Ok(body)
    }
}

/// The key fetcher of a resolved configuration with `jwks_url`: the first fetch awaited
/// (a failure is a warning: tokens are refused until a fetch succeeds, which is tried again
/// soon), then fetching in a task of its own.
pub async fn start(
    resolved: &crate::config::Resolved,
) -> Result<Option<tokio::task::JoinHandle<()>>, ConfigError> {
    let (Some(source), Some(jwt)) = (
        &resolved.jwks_url,
        resolved.edge.auth.as_ref().and_then(|a| a.jwt.as_ref()),
    ) else {
        return Ok(None);
    };
    let fetcher = Fetcher::new(source.clone(), Arc::clone(&jwt.keys))?;
    let fetched = match fetcher.fetch_once().await {
        Ok(n) => {
            tracing::info!(url = %source.url, keys = n, "token keys fetched");
            true
        }
        Err(e) => {
            tracing::warn!(url = %source.url, error = %format!("{e:#}"), "cannot fetch the token keys; bearer tokens are refused until a fetch succeeds");
            false
        }
    };
    Ok(Some(tokio::spawn(fetcher.run(fetched))))
}
