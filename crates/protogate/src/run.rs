//! `protogate serve`: resolve the configuration, load the schema, bind, serve until a signal.

use std::sync::Arc;

use anyhow::Context as _;

use crate::cli::ServeArgs;
use crate::config::{self, ConfigError};
use crate::disk::Disk;
use crate::logging;

pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // The files as read for the first snapshot, each once: the reloads compare the files with
    // these, not with what they hold once the gateway listens.
    let mut disk = Disk::default();
    let resolved = config::load_from(args.clone(), &mut disk)?;
    logging::init(resolved.log_format);
    runtime(resolved.worker_threads)?.block_on(async move {
        // The signals first: a SIGHUP (systemd's ExecReload) while the schema loads must not
        // end the process, and a SIGTERM then is a shutdown like any other.
        let (shutdown, hangups) = shutdown_signal()?;
        let upstreams = crate::config::build_upstreams(&resolved)?;
        // Validated before any port opens: a broken schema names its file and line. An
        // upstream whose reflection does not answer is named, and waited for: the gateway
        // serves (/healthz 200, /readyz 503 saying why) and asks again with backoff
        // (reload.rs), so a replica that starts before its upstreams does not crash-loop.
        let mut resolved = resolved;
        let (schema, waiting) = match crate::schema::load_at_start(&resolved, &upstreams, &mut disk).await? {
            crate::schema::AtStart::Ready(schema) => (schema, None),
            crate::schema::AtStart::Waiting { given, why } => {
                tracing::warn!(error = %why, "no schema yet: the gateway answers 503 (and /readyz 503) until the upstreams' reflection answers; asking again in 1 s, then less often");
                let schema = match given {
                    Some(schema) => schema,
                    None => transcode::Schema::from_descriptor_set(&[])
                        .map_err(|e| anyhow::anyhow!("an empty schema: {e}"))?,
                };
                (schema, Some(why))
            }
        };
        let methods = schema.methods().count();
        // The certificate is loaded now (a bad one is a configuration error), then watched.
        let tls_watch = match &resolved.tls {
            Some(files) => {
                let loaded = files.load()?;
                resolved.edge.tls = Some(loaded.tls.clone());
                Some(loaded.watch(files.clone()))
            }
            None => None,
        };
        #[cfg(feature = "otel")]
        let exporter = match &resolved.otel {
            Some(otel) => {
                let (exporter, tracer) = crate::otel::Exporter::start(otel)?;
                tracing::info!(endpoint = %otel.endpoint, "spans exported over OTLP/gRPC");
                resolved.edge.tracer = Some(tracer);
                Some(exporter)
            }
            None => None,
        };
        // A request for a method the schema lacks asks the reflection again (reload.rs).
        let unknown_method = Arc::new(tokio::sync::Notify::new());
        if resolved.reflection.is_some() {
            resolved.edge.unknown_method = Some(unknown_method.clone());
        }
        // The token keys of a jwks_url: fetched once now (a failure is a warning), then kept
        // fresh in a task of their own; every snapshot shares them (reload.rs).
        let _jwks = crate::jwks::start(&resolved).await?;
        let mut first = resolved.edge.clone();
        if let Some(why) = waiting {
            // The REST rules of methods still to come wait with them.
            let has = |selector: &str| {
                schema
                    .methods()
                    .any(|m| edge::selector::dotted(&m.full_name) == selector)
            };
            first.http_rules.retain(|rule| has(&rule.selector));
            first.schema_waiting = Some(why.into());
        }
        let edge = Arc::new(edge::Edge::new(schema, upstreams, first).map_err(|e| ConfigError(e.to_string()))?);
        let live = edge::Live::new(edge);
        // Before the "listening" lines: the files are watched from then on.
        let reloads = crate::reload::spawn(
            args,
            live.clone(),
            &resolved,
            disk,
            tls_watch.as_ref().map(crate::tls::Watch::settings),
            hangups,
            unknown_method,
        );
        // Bound last: every configuration error is reported before a port opens.
        let listeners = resolved.listen.bind()?;
        let admin_listeners = match &resolved.admin_listen {
            Some(admin) => admin.bind()?,
            None => Vec::new(),
        };
        for listener in &listeners {
            let addr = listener.local_addr()?;
            let scheme = if tls_watch.is_some() { "https" } else { "http" };
            tracing::info!(%addr, methods, upstream = resolved.default_upstream.as_ref().map_or("-".to_owned(), |urls| urls.join(",")), "listening on {scheme}://{addr}");
        }
        // The admin listener serves until the main one has stopped: /readyz answers 503 there
        // while the gateway drains.
        let (main_done, admin_stop) = tokio::sync::watch::channel(false);
        let mut admins = Vec::new();
        for listener in admin_listeners {
            let addr = listener.local_addr()?;
            tracing::info!(%addr, "admin endpoints (/healthz, /readyz, /metrics, /admin/migration[.json], /admin/schema) on http://{addr}");
            let mut stop = admin_stop.clone();
            admins.push(tokio::spawn(edge::serve_admin(listener, live.clone(), async move {
                let _ = stop.wait_for(|done| *done).await;
            })));
        }
        edge::serve_all(listeners, live, shutdown).await;
        reloads.abort();
        if let Some(watch) = tls_watch {
            watch.abort();
        }
        main_done.send_replace(true);
        for admin in admins {
            let _ = admin.await;
        }
        // The spans still batched go out before the process ends (the shutdown blocks, so
        // off the runtime's thread).
        #[cfg(feature = "otel")]
        if let Some(exporter) = exporter {
            let _ = tokio::task::spawn_blocking(move || exporter.shutdown()).await;
        }
        Ok(())
    })
}

/// The Tokio runtime: `threads` workers (0: one per CPU the process may use). With one, the
/// single-threaded scheduler: on one core it serves small requests ~1.6x faster over HTTP/2
/// than a one-worker multi-threaded runtime (no cross-thread wake-ups; BENCHMARKS.md, "Tuning").
pub(crate) fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build().context("starting the runtime")
}

/// Installs the SIGINT, SIGTERM and SIGHUP handlers now (so a signal that arrives right after
/// the "listening" line is not missed) and returns a future that resolves on SIGINT or
/// SIGTERM — the gateway then drains and stops; a second signal while it does ends the
/// process at once (exit 1) — and the SIGHUPs, each a reload (reload.rs).
/// Must be called inside the runtime.
pub(crate) fn shutdown_signal()
-> anyhow::Result<(impl Future<Output = ()>, tokio::sync::mpsc::Receiver<()>)> {
    // One reload waiting is enough: SIGHUPs while it waits are the same request.
    let (hangups_tx, hangups) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt =
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let mut terminate =
            signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        // SIGHUP (systemd's ExecReload, `kill -HUP`) reloads; its default action would end
        // the gateway.
        let mut hangup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::debug!("SIGHUP received");
                let _ = hangups_tx.try_send(());
            }
        });
        Ok((
            async move {
                tokio::select! {
                    _ = interrupt.recv() => tracing::info!("SIGINT received"),
                    _ = terminate.recv() => tracing::info!("SIGTERM received"),
                }
                tokio::spawn(async move {
                    let which = tokio::select! {
                        _ = interrupt.recv() => "SIGINT",
                        _ = terminate.recv() => "SIGTERM",
                    };
                    tracing::warn!("{which} received while shutting down: exiting at once");
                    std::process::exit(1);
                });
            },
            hangups,
        ))
    }
    #[cfg(not(unix))]
    {
        drop(hangups_tx);
        Ok((
            async {
                let _ = tokio::signal::ctrl_c().await;
            },
            hangups,
        ))
    }
}
