//! TLS settings from PEM files: the listener's certificate, key and client
//! CA, re-read when the files change; upstreams' CA, client certificate and server name.
//! Every error names the setting and the file, and is a configuration error (exit 64) at
//! startup.
//!
//! Rotation is found by reading the files again every [`RELOAD_EVERY`] and comparing their
//! bytes, not by file notifications: cert-manager and Kubernetes replace a mounted secret by
//! swapping a `..data` symlink in the directory, which a watch on the file itself does not
//! see, and a comparison sees every kind of replacement (rename, symlink swap, rewrite in
//! place) with one mechanism. The files are a few KB: reading them costs microseconds.
//!
//! A reload (reload.rs) that changes the listener's settings — the files' paths, `client_ca`,
//! `client_auth` — while TLS stays on reads and builds them ([`ListenerFiles::prepare`]; files
//! that do not work fail the reload) and hands them to the same watcher ([`Settings`]), which
//! puts them in force for new connections and compares the new files from then on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use edge::UpstreamTls;
use edge::server::ListenerTls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use serde::Deserialize;

use crate::config::ConfigError;

/// How often the listener's files are read again.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// `[tls] client_auth`: whether a client must present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    Required,
    Optional,
}

/// The listener's files (`--tls-cert`, `--tls-key`, `[tls]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Client certificates are asked for, and checked against this CA.
    pub client_ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// The bytes a configuration was built from: when they change, it is built again.
#[derive(PartialEq, Eq)]
struct Contents(Vec<Vec<u8>>);

impl ListenerFiles {
    fn read(&self) -> Result<Contents, ConfigError> {
        let mut all = vec![read(&self.cert, "tls.cert")?, read(&self.key, "tls.key")?];
        if let Some(ca) = &self.client_ca {
            all.push(read(ca, "tls.client_ca")?);
        }
        Ok(Contents(all))
    }

    /// The server configuration and its certificate (the chain's first).
    fn build(
        &self,
        contents: &Contents,
    ) -> Result<(ServerConfig, CertificateDer<'static>), ConfigError> {
        let chain = certificates(&contents.0[0], &self.cert, "tls.cert")?;
        let leaf = chain[0].clone();
        let key = private_key(&contents.0[1], &self.key, "tls.key")?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ConfigError(format!("tls: {e}")))?;
        let builder = match (&self.client_ca, contents.0.get(2)) {
            (Some(path), Some(ca)) => {
                let roots = roots(ca, path, "tls.client_ca")?;
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = match self.client_auth {
                    ClientAuth::Required => verifier,
                    ClientAuth::Optional => verifier.allow_unauthenticated(),
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| ConfigError(format!("tls.client_ca {}: {e}", path.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, key).map_err(|e| {
            ConfigError(format!(
                "tls.key {} does not go with the certificate in tls.cert {}: {e}",
                self.key.display(),
                self.cert.display()
            ))
        })?;
        Ok((config, leaf))
    }

    /// The listener's TLS, loaded now; an error names the file at fault.
    pub fn load(&self) -> Result<Loaded, ConfigError> {
        let contents = self.read()?;
        let (config, leaf) = self.build(&contents)?;
        Ok(Loaded {
            tls: ListenerTls::new(config, &leaf),
            contents,
        })
    }

    /// These settings read and built now, for a reload to hand to the running watcher
    /// ([`Settings::apply`]); an error names the file at fault.
    pub fn prepare(&self) -> Result<Prepared, ConfigError> {
        let contents = self.read()?;
        let (config, leaf) = self.build(&contents)?;
        Ok(Prepared {
            files: self.clone(),
            contents,
            config,
            leaf,
        })
    }
}

/// The listener's TLS and the bytes it was built from.
pub struct Loaded {
    pub tls: ListenerTls,
    contents: Contents,
}

/// New settings for the listener, built, and the bytes they were built from.
pub struct Prepared {
    files: ListenerFiles,
    contents: Contents,
    config: ServerConfig,
    leaf: CertificateDer<'static>,
}

/// Where a reload hands the watcher new settings, and hears they are in force.
type Updates = tokio::sync::mpsc::UnboundedSender<(Prepared, tokio::sync::oneshot::Sender<()>)>;

/// The running watcher ([`Loaded::watch`]).
pub struct Watch {
    task: tokio::task::JoinHandle<()>,
    updates: Updates,
}

impl Watch {
    /// Where a reload hands it new settings.
    pub fn settings(&self) -> Settings {
        Settings(self.updates.clone())
    }

    pub fn abort(&self) {
        self.task.abort();
    }
}

/// The running watcher's settings, replaced by a reload.
#[derive(Clone)]
pub struct Settings(Updates);

impl Settings {
    /// Puts `prepared` in force for new connections (open ones keep theirs); from then on the
    /// watcher reads its files. Returns once it is in force.
    pub async fn apply(&self, prepared: Prepared) {
        let (done, applied) = tokio::sync::oneshot::channel();
        if self.0.send((prepared, done)).is_ok() {
            let _ = applied.await;
        }
    }
}

impl Loaded {
    /// Reads the files every [`RELOAD_EVERY`]; when they change and make a working
    /// configuration, new connections get it (open ones keep theirs). Changed files that do
    /// not work are logged once and the configuration in force is kept. New settings from a
    /// reload ([`Watch::settings`]) are put in force at once, in the same task, so a read of
    /// the old files cannot follow them.
    pub fn watch(self, files: ListenerFiles) -> Watch {
        let Loaded { tls, contents } = self;
        let (updates, mut updated) =
            tokio::sync::mpsc::unbounded_channel::<(Prepared, tokio::sync::oneshot::Sender<()>)>();
        let task = tokio::spawn(async move {
            let mut files = files;
            let mut seen = contents;
            let mut ticks = tokio::time::interval(RELOAD_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    Some((prepared, done)) = updated.recv() => {
                        tls.replace(prepared.config, &prepared.leaf);
                        files = prepared.files;
                        seen = prepared.contents;
                        tracing::info!(
                            cert = %files.cert.display(),
                            client_ca = ?files.client_ca,
                            client_auth = ?files.client_auth,
                            "the listener's TLS settings changed: new connections use them"
                        );
                        let _ = done.send(());
                        continue;
                    }
                }
                let contents = match files.read() {
                    Ok(contents) if contents == seen => continue,
                    Ok(contents) => contents,
                    // Half-written or being replaced: looked at again next time.
                    Err(_) => continue,
                };
                match files.build(&contents) {
                    Ok((config, leaf)) => {
                        tls.replace(config, &leaf);
                        tracing::info!(cert = %files.cert.display(), "TLS certificate reloaded: new connections use it");
                    }
                    Err(error) => {
                        tracing::warn!(%error, "TLS files changed but do not work; the certificate in force is kept");
                    }
                }
                seen = contents;
            }
        });
        Watch { task, updates }
    }
}

/// An upstream's TLS settings as configured (`ca`, `client_cert`, `client_key`,
/// `server_name`, per service over the top level's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamFiles {
    pub ca: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub server_name: Option<String>,
}

impl UpstreamFiles {
    pub fn is_empty(&self) -> bool {
        *self == UpstreamFiles::default()
    }

    /// These settings, each one not set here taken from `default`.
    pub fn over(self, default: &UpstreamFiles) -> UpstreamFiles {
        UpstreamFiles {
            ca: self.ca.or_else(|| default.ca.clone()),
            client_cert: self.client_cert.or_else(|| default.client_cert.clone()),
            client_key: self.client_key.or_else(|| default.client_key.clone()),
            server_name: self.server_name.or_else(|| default.server_name.clone()),
        }
    }
}

/// Builds upstreams' TLS, one rustls configuration per distinct set of files (upstreams
/// configured alike share one, and so a connection when their URI is the same too).
#[derive(Default)]
pub struct UpstreamTlsCache {
    built: Vec<(UpstreamFiles, UpstreamTls)>,
}

impl UpstreamTlsCache {
    /// TLS for the `https` upstream `uri` whose host is `host` (the server name unless
    /// `server_name` is set).
    pub fn get(
        &mut self,
        uri: &str,
        host: &str,
        files: &UpstreamFiles,
    ) -> Result<UpstreamTls, ConfigError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = files.server_name.as_deref().unwrap_or(host);
        let server_name = ServerName::try_from(name.to_owned()).map_err(|e| {
            ConfigError(format!(
                "upstream {uri:?}: server_name {name:?} is not a DNS name or IP address: {e}"
            ))
        })?;
        let key = UpstreamFiles {
            server_name: None,
            ..files.clone()
        };
        if let Some((_, tls)) = self.built.iter().find(|(f, _)| *f == key) {
            return Ok(tls.for_server(server_name));
        }
        let config = client_config(uri, &key)?;
        let tls = UpstreamTls::new(config, server_name);
        self.built.push((key, tls.clone()));
        Ok(tls)
    }
}

fn client_config(uri: &str, files: &UpstreamFiles) -> Result<ClientConfig, ConfigError> {
    let roots = root_store(files.ca.as_deref(), &format!("upstream {uri:?}"), "ca")?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError(format!("upstream {uri:?}: {e}")))?
        .with_root_certificates(roots);
    match (&files.client_cert, &files.client_key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = certificates(&read(cert, "client_cert")?, cert, "client_cert")?;
            let private = private_key(&read(key, "client_key")?, key, "client_key")?;
            builder.with_client_auth_cert(chain, private).map_err(|e| {
                ConfigError(format!(
                    "client_key {} does not go with the certificate in client_cert {}: {e}",
                    key.display(),
                    cert.display()
                ))
            })
        }
        (Some(_), None) => Err(ConfigError(format!(
            "upstream {uri:?}: client_cert is set without client_key"
        ))),
        (None, Some(_)) => Err(ConfigError(format!(
            "upstream {uri:?}: client_key is set without client_cert"
        ))),
    }
}

/// The roots a server's certificate is checked against: the PEM file `ca` (the setting
/// `setting`), else the system's; `whose` names the server in the error.
pub(crate) fn root_store(
    ca: Option<&Path>,
    whose: &str,
    setting: &str,
) -> Result<Arc<RootCertStore>, ConfigError> {
    if let Some(ca) = ca {
        return roots(&read(ca, setting)?, ca, setting);
    }
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(ConfigError(format!(
            "{whose}: no {setting} is set and the system has no CA certificates{}; set {setting}",
            found
                .errors
                .first()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )));
    }
    Ok(Arc::new(roots))
}

/// rustls's ring provider, named rather than taken from the process default (which rustls
/// cannot choose when a dependency enables a second provider).
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path, setting: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError(format!("{setting} {}: {e}", path.display())))
}

fn certificates(
    pem: &[u8],
    path: &Path,
    setting: &str,
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError(format!("{setting} {}: {e}", path.display())))?;
    if chain.is_empty() {
        return Err(ConfigError(format!(
            "{setting} {}: no PEM certificate in the file",
            path.display()
        )));
    }
    Ok(chain)
}

fn private_key(
    pem: &[u8],
    path: &Path,
    setting: &str,
) -> Result<PrivateKeyDer<'static>, ConfigError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
        ConfigError(format!(
            "{setting} {}: no PEM private key in the file ({e})",
            path.display()
        ))
    })
}

fn roots(pem: &[u8], path: &Path, setting: &str) -> Result<Arc<RootCertStore>, ConfigError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(pem, path, setting)? {
        roots
            .add(cert)
            .map_err(|e| ConfigError(format!("{setting} {}: {e}", path.display())))?;
    }
    Ok(Arc::new(roots))
}
