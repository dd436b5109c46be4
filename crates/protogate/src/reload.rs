//! Hot reload. On SIGHUP, when the config file, a descriptor set or a
//! `.proto` file changes on disk (watched with `notify`, changes within [`DEBOUNCE`] taken
//! together), and — when the schema comes from the upstreams' reflection — every
//! `schema_refresh` and on a request for a method the schema lacks (at most once per
//! `schema_refresh`), the gateway builds a new snapshot — configuration, schema, routes,
//! upstreams — validates it completely and swaps it in (`edge::Live`). Requests in flight finish on the
//! snapshot they started with; upstreams configured as before keep their pools and
//! connections. A snapshot that fails is logged with the reason and counted
//! (`protogate_schema_reloads_total{result="failed"}`), and the running one stays. What only
//! a restart changes — every setting read once at start ([`Fixed`]) — is named in the log
//! when it changed. The listener's TLS settings (certificate, key, `client_ca`,
//! `client_auth`) are put in force by the TLS watcher (tls.rs) when TLS stays on; turning TLS
//! on or off takes a restart. A configuration that fails to load (the config file
//! unreadable, not TOML, a value refused) is reported once: until the files change, a
//! `schema_refresh` asks the reflection with the configuration in force
//! rather than failing on the same file again. (A `.proto` that does not compile is found
//! only while the schema is built, together with what the reflection gives, and is reported
//! at each refresh as before: telling the two apart there would let a refresh keep an old
//! configuration whose files are fine.)
//!
//! The files' directories are watched, not the files: editors replace a file by renaming
//! another over it, which a watch on the file itself stops seeing, and Kubernetes swaps a
//! `..data` symlink beside a ConfigMap's files, which no event on the files themselves
//! reports. Any change in those directories is a candidate; the gateway reloads when the
//! files' contents differ from those it last loaded — the bytes the load read and built
//! from ([`Disk`]), never the files read again after, so a file written during or just after
//! a load is reloaded. The watch begins before the gateway says it listens, and the files
//! are compared with those the running configuration was built from as it begins (and as
//! each new watch does): a change made before a watch began is reloaded too.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cli::ServeArgs;
use crate::config::{self, Resolved};
use crate::disk::{self, Disk};
use crate::tls::{self, ListenerFiles};

/// File events this close together are one change.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// The warning's name for TLS turned on or off on the listener.
const TLS_ON_OFF: &str = "the listener's TLS (on or off)";

/// What a reload compares against: the settings only a restart changes, each as the warning
/// names it, with its value as text. They are every setting read once at start: by `run`
/// (the addresses bound, the runtime, the log, the span exporter, whether the listener speaks
/// TLS), by `edge::Edge::new` for what every snapshot shares and `Edge::reload` keeps (the
/// admission limits, the migration report's bound, the downgrade log), and by the listener,
/// whose own settings are the first snapshot's (`edge::serve_all`, its hyper builder and
/// each connection's driver, and `serve_admin`). Where a reload puts part of a setting in
/// force, the name says which part waits: `max_header_bytes` is also checked per request
/// (a lower value holds at once), but hyper's buffer and HTTP/2 header list limit stay;
/// `upstream_timeout` caps calls at once, but is also the shutdown grace period;
/// `access_log` lines start and stop at once, but whether they name the peer is decided by
/// the connection's span, as at start.
struct Fixed(Vec<(&'static str, String)>);

impl Fixed {
    fn of(resolved: &Resolved) -> Fixed {
        fn text(value: &dyn std::fmt::Debug) -> String {
            format!("{value:?}")
        }
        let edge = &resolved.edge;
        Fixed(vec![
            // run.rs.
            ("listen", resolved.listen.to_string()),
            (
                "admin_listen",
                text(&resolved.admin_listen.as_ref().map(ToString::to_string)),
            ),
            (TLS_ON_OFF, text(&resolved.tls.is_some())),
            ("worker_threads", text(&resolved.worker_threads)),
            ("log_format", text(&resolved.log_format)),
            ("[otel]", text(&resolved.otel)),
            (
                "[auth] jwks_url, jwks_refresh, jwks_ca",
                text(&resolved.jwks_url),
            ),
            // edge::Edge::new: what every snapshot shares.
            (
                "max_concurrent_requests",
                text(&edge.max_concurrent_requests),
            ),
            ("max_inflight_bytes", text(&edge.max_inflight_bytes)),
            ("migration.max_clients", text(&edge.migration.max_clients)),
            ("downgrade_log_interval", text(&edge.downgrade_log_interval)),
            (
                "downgrade_log_max_lines",
                text(&edge.downgrade_log_max_lines),
            ),
            // edge::serve_all, http_builder, drive.rs, serve_admin: the listener's own.
            ("max_connections", text(&edge.max_connections)),
            ("header_read_timeout", text(&edge.header_read_timeout)),
            ("idle_timeout", text(&edge.idle_timeout)),
            (
                "max_header_bytes (hyper's HTTP/1.1 buffer and HTTP/2 header list limit)",
                text(&edge.max_header_bytes),
            ),
            ("max_concurrent_streams", text(&edge.max_concurrent_streams)),
            ("drain_delay", text(&edge.drain_delay)),
            (
                "upstream_timeout (as the shutdown grace period)",
                text(&edge.shutdown_grace),
            ),
            (
                "access_log (whether its lines name the peer)",
                text(&edge.access_log),
            ),
        ])
    }

    /// What differs from `other`, by name.
    fn changes(&self, other: &Fixed) -> Vec<&'static str> {
        self.0
            .iter()
            .zip(&other.0)
            .filter(|(now, before)| now.1 != before.1)
            .map(|(now, _)| now.0)
            .collect()
    }
}

/// The key set of a configuration's bearer tokens.
fn jwt_keys(resolved: &Resolved) -> Option<Arc<edge::auth::Jwks>> {
    let jwt = resolved.edge.auth.as_ref()?.jwt.as_ref()?;
    Some(Arc::clone(&jwt.keys))
}

/// A reloaded configuration whose keys come from a URL verifies with the keys the fetcher
/// started at start-up keeps (a changed `jwks_url` is a restart's, named as such).
fn keep_fetched_keys(resolved: &mut Resolved, fetched: Option<&Arc<edge::auth::Jwks>>) {
    if resolved.jwks_url.is_none() {
        return;
    }
    if let (Some(keys), Some(jwt)) = (
        fetched,
        resolved.edge.auth.as_mut().and_then(|a| a.jwt.as_mut()),
    ) {
        jwt.keys = Arc::clone(keys);
    }
}

/// The files a snapshot was built from: a change to any of them reloads.
fn watched_files(args: &ServeArgs, resolved: &Resolved) -> BTreeSet<PathBuf> {
    args.config
        .iter()
        .chain(&resolved.schema.descriptor_sets)
        .chain(&resolved.schema.protos)
        .chain(&resolved.jwks_file)
        .map(|p| disk::absolute(p))
        .collect()
}

/// Why a reload runs.
#[derive(Clone, Copy, PartialEq)]
enum Trigger {
    Hangup,
    FileChanged,
    /// `schema_refresh` passed: the upstreams' reflection is asked again.
    Refresh,
    /// A request named a method the schema lacks.
    UnknownMethod,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Hangup => "SIGHUP",
            Trigger::FileChanged => "a watched file changed",
            Trigger::Refresh => "schema_refresh",
            Trigger::UnknownMethod => "a request named an unknown method",
        }
    }

    /// A reload that only asks the reflection again: when nothing changed, it is no news.
    fn is_refresh(self) -> bool {
        matches!(self, Trigger::Refresh | Trigger::UnknownMethod)
    }
}

/// The first retry of a reflection that did not answer at start.
const WAITING_FIRST_RETRY: Duration = Duration::from_secs(1);

/// Starts reloading `live` on each `hangup`, on changes to the files `first` was built
/// from (`disk`: as they were read for it), and — when the schema comes from reflection —
/// every `schema_refresh` and when `unknown_method` is told of a request for a method the
/// schema lacks (at most once per `schema_refresh`, so requests for unknown paths cannot make
/// the gateway ask its upstreams over and over). The files are watched when this returns:
/// call it before saying the gateway listens. `tls`: the listener's TLS watcher, when TLS is
/// on, which a reload hands changed settings. Runs until the process ends.
pub fn spawn(
    args: ServeArgs,
    live: edge::Live,
    first: &Resolved,
    mut disk: Disk,
    tls: Option<tls::Settings>,
    mut hangups: mpsc::Receiver<()>,
    unknown_method: Arc<tokio::sync::Notify>,
) -> tokio::task::JoinHandle<()> {
    let mut files = watched_files(&args, first);
    // What the running configuration was built from, not what the files hold by now.
    let mut loaded = disk.fingerprint(&files);
    // Whether `loaded` is what is in force (not the files of a reload that failed): a
    // refresh is no news when the reflection gives the same schema only then.
    let mut in_force = true;
    let (changed_tx, mut changed) = mpsc::channel::<()>(1);
    let mut _watcher = watch(&files, &changed_tx, loaded);
    let mut fixed = Fixed::of(first);
    let mut refresh = first.reflection.as_ref().map(|r| r.refresh);
    // The listener's TLS settings in force (the TLS watcher's).
    let mut tls_in_force = first.tls.clone();
    // The configuration last put in force, and whether the configuration failed to load
    // since (the files unchanged after): a refresh then asks the reflection with the one in
    // force instead of reading the broken files again, which would fail the refresh and
    // report the same error at every `schema_refresh`.
    let mut good = first.clone();
    let mut broken = false;
    // The key set a jwks_url is fetched into (run.rs): every snapshot verifies with it.
    let fetched_keys = first.jwks_url.as_ref().and_then(|_| jwt_keys(first));
    tokio::spawn(async move {
        // While the start waits for the reflection (run.rs), it is asked again after 1 s,
        // doubling up to schema_refresh.
        let waiting = |live: &edge::Live| live.load().config().schema_waiting.is_some();
        let mut backoff = WAITING_FIRST_RETRY;
        let mut next_refresh = Instant::now()
            + if waiting(&live) {
                backoff
            } else {
                refresh.unwrap_or_default()
            };
        let mut last_unknown: Option<Instant> = None;
        loop {
            // The files as this reload reads them: once, for the comparison, the load and
            // what it notes as loaded.
            let mut disk = Disk::default();
            let trigger = tokio::select! {
                Some(()) = hangups.recv() => Trigger::Hangup,
                Some(()) = changed.recv() => {
                    // Whatever else changes in the next moments is the same change.
                    while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, changed.recv()).await {}
                    if disk.fingerprint(&files) == loaded {
                        continue;
                    }
                    Trigger::FileChanged
                }
                () = tokio::time::sleep_until(next_refresh), if refresh.is_some() => Trigger::Refresh,
                () = unknown_method.notified(), if refresh.is_some() => {
                    let every = refresh.unwrap_or_default();
                    if last_unknown.is_some_and(|at| at.elapsed() < every) {
                        continue;
                    }
                    last_unknown = Some(Instant::now());
                    Trigger::UnknownMethod
                }
                else => return,
            };
            let metrics = live.load().metrics().schema_reloads.clone();
            let began = Instant::now();
            // A refresh when no file changed is no news if the reflection gives the same.
            let unchanged = trigger.is_refresh() && disk.fingerprint(&files) == loaded;
            let mut tls_changed = None;
            let was_waiting = waiting(&live);
            let outcome = if unchanged && broken {
                reload(
                    good.clone(),
                    &live,
                    &unknown_method,
                    !was_waiting,
                    &mut disk,
                    None,
                )
                .await
            } else {
                // (While waiting, the same schema as the waiting snapshot's is news too.)
                let quiet = unchanged && in_force && !was_waiting;
                match config::load_from(args.clone(), &mut disk) {
                    Ok(mut resolved) => {
                        broken = false;
                        keep_fetched_keys(&mut resolved, fetched_keys.as_ref());
                        match prepare_tls(tls.as_ref(), tls_in_force.as_ref(), &resolved) {
                            Ok(prepared) => {
                                let apply = prepared.zip(tls.clone());
                                if apply.is_some() {
                                    tls_changed = resolved.tls.clone();
                                }
                                reload(resolved, &live, &unknown_method, quiet, &mut disk, apply)
                                    .await
                            }
                            Err(error) => Err(error.into()),
                        }
                    }
                    Err(error) => {
                        broken = true;
                        Err(error.into())
                    }
                }
            };
            match outcome {
                Ok(None) => {
                    tracing::debug!(
                        trigger = trigger.as_str(),
                        "the reflected schema is unchanged"
                    );
                }
                Ok(Some((resolved, summary))) => {
                    // What was built is what the files held when read, whatever they hold
                    // now: a write since differs, and is reloaded.
                    let now = watched_files(&args, &resolved);
                    loaded = disk.fingerprint(&now);
                    // (Still broken: what is in force is `good`, not the files.)
                    in_force = !broken;
                    if tls_changed.is_some() {
                        tls_in_force = tls_changed;
                    }
                    metrics
                        .get_or_create(&edge::metrics::ResultLabels { result: "ok" })
                        .inc();
                    let took_ms = began.elapsed().as_secs_f64() * 1000.0;
                    tracing::info!(trigger = trigger.as_str(), digest = %live.load().digest(), took_ms, "configuration reloaded: {summary}");
                    let restart = Fixed::of(&resolved);
                    let needs_restart = restart.changes(&fixed);
                    if !needs_restart.is_empty() {
                        tracing::warn!(
                            "changed, but in force only after a restart: {}",
                            needs_restart.join(", ")
                        );
                    }
                    fixed = restart;
                    refresh = resolved.reflection.as_ref().map(|r| r.refresh);
                    if now != files {
                        files = now;
                        _watcher = watch(&files, &changed_tx, loaded);
                    }
                    good = resolved;
                }
                Err(error) if was_waiting => {
                    loaded = disk.fingerprint(&files);
                    backoff = (backoff * 2).min(refresh.unwrap_or_default());
                    tracing::warn!(
                        error = format!("{error:#}"),
                        retry_in_ms = backoff.as_millis() as u64,
                        "no schema yet: the upstreams' reflection is asked again"
                    );
                }
                Err(error) => {
                    // Not read again until the files change (or a SIGHUP); after a
                    // configuration that did not load, a refresh meanwhile asks the
                    // reflection with the configuration in force. What is noted is what this
                    // reload read: a file written since is reloaded.
                    loaded = disk.fingerprint(&files);
                    in_force = false;
                    metrics
                        .get_or_create(&edge::metrics::ResultLabels { result: "failed" })
                        .inc();
                    tracing::error!(
                        trigger = trigger.as_str(),
                        error = format!("{error:#}"),
                        "reload failed; the running configuration stays"
                    );
                }
            }
            // Every reload asked the reflection (when there is one): the next refresh is an
            // interval away, or the backoff's next step while the start still waits.
            let every = refresh.unwrap_or_default();
            next_refresh = Instant::now() + if waiting(&live) { backoff } else { every };
        }
    })
}

/// The listener's TLS settings of `resolved`, read and built, when they differ from those in
/// force and TLS stays on (turning it on or off takes a restart: [`Fixed`]); files that do not
/// work fail the reload, naming the file.
fn prepare_tls(
    watcher: Option<&tls::Settings>,
    in_force: Option<&ListenerFiles>,
    resolved: &Resolved,
) -> Result<Option<tls::Prepared>, config::ConfigError> {
    match (watcher, in_force, &resolved.tls) {
        (Some(_), Some(now), Some(new)) if now != new => new.prepare().map(Some),
        _ => Ok(None),
    }
}

/// Watches the directories of `files`, telling `changed` of any change in them, then compares
/// the files with `loaded` (what the configuration in force was built from): a change made
/// before the watch began is told too. None (and a warning) when the system cannot watch
/// them: SIGHUP still reloads.
fn watch(
    files: &BTreeSet<PathBuf>,
    changed: &mpsc::Sender<()>,
    loaded: u64,
) -> Option<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let tell = changed.clone();
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if !matches!(event.kind, EventKind::Access(_)) {
            let _ = tell.try_send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(error) => {
            tracing::warn!(%error, "files cannot be watched; SIGHUP reloads");
            return None;
        }
    };
    let dirs: BTreeSet<PathBuf> = files
        .iter()
        .filter_map(|f| f.parent().map(PathBuf::from))
        .collect();
    for dir in dirs {
        if let Err(error) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %dir.display(), %error, "cannot watch this directory; SIGHUP reloads");
        }
    }
    if Disk::default().fingerprint(files) != loaded {
        let _ = changed.try_send(());
    }
    Some(watcher)
}

/// Builds the new snapshot from `resolved` (its files read through `disk`, and the
/// upstreams' reflection) and puts it in force, with the listener's new TLS settings when
/// `tls` has them; what it changed in words. With `quiet`, a snapshot whose schema is the
/// running one's is not put in force (`None`): the configuration is known unchanged.
async fn reload(
    resolved: Resolved,
    live: &edge::Live,
    unknown_method: &Arc<tokio::sync::Notify>,
    quiet: bool,
    disk: &mut Disk,
    tls: Option<(tls::Prepared, tls::Settings)>,
) -> anyhow::Result<Option<(Resolved, String)>> {
    let old = live.load();
    let (default, services) = crate::config::upstream_specs(&resolved)?;
    let upstreams = old
        .upstreams()
        .rebuild(
            default,
            services,
            resolved.edge.max_response_bytes,
            resolved.upstream_options,
            Arc::new(edge::SystemResolver),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let schema = crate::schema::load(&resolved, &upstreams, disk).await?;
    // The running schema's digest is known: one encoding of the new one, not two.
    if quiet && *edge::schema_digest(&schema) == *old.digest() {
        return Ok(None);
    }
    let mut config = resolved.edge.clone();
    // The listener's TLS (reloaded on its own as its files change) and the tracer stay.
    config.tls = old.config().tls.clone();
    config.tracer = old.config().tracer.clone();
    config.unknown_method = resolved
        .reflection
        .is_some()
        .then(|| unknown_method.clone());
    let summary = changes(old.schema(), &schema);
    let new = old
        .reload(schema, upstreams, config)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    live.swap(Arc::new(new));
    if let Some((prepared, watcher)) = tls {
        watcher.apply(prepared).await;
    }
    Ok(Some((resolved, summary)))
}

/// The methods `new` adds, removes and changes (input or output type) against `old`.
fn changes(old: &transcode::Schema, new: &transcode::Schema) -> String {
    let types = |m: &transcode::Method| {
        (
            m.input.full_name().to_owned(),
            m.output.full_name().to_owned(),
            m.streaming,
        )
    };
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for method in new.methods() {
        match old.method(&method.path) {
            None => added.push(method.full_name.to_string()),
            Some(before) if types(before) != types(method) => {
                changed.push(method.full_name.to_string());
            }
            Some(_) => {}
        }
    }
    let mut removed: Vec<String> = old
        .methods()
        .filter(|m| new.method(&m.path).is_none())
        .map(|m| m.full_name.to_string())
        .collect();
    for list in [&mut added, &mut changed, &mut removed] {
        list.sort_unstable();
    }
    let list = |l: &[String]| {
        if l.is_empty() {
            "none".to_owned()
        } else {
            l.join(", ")
        }
    };
    format!(
        "methods added: {}; removed: {}; changed: {}",
        list(&added),
        list(&removed),
        list(&changed)
    )
}
