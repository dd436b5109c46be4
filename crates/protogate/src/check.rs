//! `protogate check`: loads and validates everything `serve` would — the configuration, the
//! schema, the REST rules and routes, the upstream URLs and their TLS files, the listener's
//! certificate, the JSON sunset policy — without opening a port, then prints the route table
//! and the sunset policy in force per method (exit 0), or every problem found (exit 64).
//! CI pipelines run it before a deploy; an init container can run it before the gateway.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::cli::ServeArgs;
use crate::config::{self, ConfigError, Resolved};
use crate::schema_files;

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    // A configuration that does not parse hides everything after it: the one problem.
    let resolved = config::load(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (report, problems) = runtime.block_on(check(resolved));
    if problems.is_empty() {
        print!("{report}");
        return Ok(());
    }
    let mut text = format!(
        "{} problem{} found:",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in &problems {
        let _ = write!(text, "\n  - {}", problem.replace('\n', "\n    "));
    }
    Err(ConfigError(text).into())
}

/// The report of a configuration that works, or every problem it has (then the report is
/// empty).
async fn check(mut resolved: Resolved) -> (String, Vec<String>) {
    let mut problems = Vec::new();
    if let Some(files) = &resolved.tls {
        match files.load() {
            Ok(loaded) => resolved.edge.tls = Some(loaded.tls),
            Err(e) => problems.push(e.to_string()),
        }
    }
    let upstreams = crate::config::build_upstreams(&resolved)
        .map_err(|e| problems.push(e.to_string()))
        .ok();
    // With reflection (`--reflect`, `schema_source = "reflection"`, a service's `reflect`),
    // the live upstreams are asked, as `serve` would ask them.
    let schema = match &upstreams {
        Some(upstreams) => {
            crate::schema::load(&resolved, upstreams, &mut crate::disk::Disk::default()).await
        }
        None if resolved.schema.is_empty() => Err(anyhow::anyhow!(
            "the schema from reflection is not checked: the upstreams do not work"
        )),
        None => schema_files::load(&resolved.schema),
    }
    .map_err(|e| problems.push(format!("{e:#}")))
    .ok();
    let (Some(schema), Some(upstreams)) = (schema, upstreams) else {
        return (String::new(), problems);
    };
    let resolved_source = resolved.edge.schema_source;
    let rules = resolved.edge.json_sunset.clone();
    let http_rules = resolved.edge.http_rules.clone();
    let dialect = resolved.edge.path_templates;
    // The edge checks what only the schema can tell: services the upstreams name, routes and
    // their conflicts, paths the gateway answers itself, the sunset policy's selectors.
    if let Err(e) = edge::Edge::new(schema.clone(), upstreams, resolved.edge) {
        problems.push(e.to_string());
        return (String::new(), problems);
    }
    let routes = match transcode::rest::Routes::with_dialect(&schema, &http_rules, dialect) {
        Ok(routes) => routes,
        Err(e) => {
            problems.push(e.to_string());
            return (String::new(), problems);
        }
    };
    let policy = match edge::migration::SunsetPolicy::new(rules) {
        Ok(policy) => policy,
        Err(e) => {
            problems.push(e.to_string());
            return (String::new(), problems);
        }
    };
    let mut methods: Vec<&str> = schema.methods().map(|m| &*m.full_name).collect();
    methods.sort_unstable();
    let effective = match policy.effective(methods.iter().copied()) {
        Ok(effective) => effective,
        Err(e) => {
            problems.push(e.to_string());
            return (String::new(), problems);
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ok: {} methods, {} REST routes (schema from {})",
        methods.len(),
        routes.iter().count(),
        resolved_source,
    );
    let mut table = vec![[
        "HTTP".to_owned(),
        "path".to_owned(),
        "gRPC method".to_owned(),
        "body".to_owned(),
        "response_body".to_owned(),
        "protocols".to_owned(),
    ]];
    for method in &methods {
        let protocols = schema
            .method(&format!("/{method}"))
            .map_or_else(Vec::new, edge::protocol::reaching)
            .join(",");
        table.push([
            "POST".to_owned(),
            format!("/{method}"),
            (*method).to_owned(),
            "*".to_owned(),
            "-".to_owned(),
            protocols,
        ]);
    }
    for route in routes.iter() {
        let or_dash = |s: &str| {
            if s.is_empty() {
                "-".to_owned()
            } else {
                s.to_owned()
            }
        };
        table.push([
            route.rule.method.clone(),
            route.rule.path.clone(),
            route.method.full_name.to_string(),
            or_dash(&route.rule.body),
            or_dash(&route.rule.response_body),
            "http".to_owned(),
        ]);
    }
    out.push('\n');
    out.push_str(&aligned(&table));
    out.push_str("\nJSON sunset policy:\n");
    if effective.is_empty() {
        out.push_str("  none\n");
    }
    let now = SystemTime::now();
    let time = |t: Option<SystemTime>| t.map_or("-".to_owned(), edge::migration::rfc3339);
    for (method, rule) in &effective {
        let spec = rule.spec();
        let _ = writeln!(
            out,
            "  {method}: {} (rule {:?}), deprecation {}, sunset {}, {} brownout{}{}{}",
            rule.phase(now).as_str(),
            rule.selector(),
            time(spec.deprecation),
            time(spec.sunset),
            spec.brownouts.len(),
            if spec.brownouts.len() == 1 { "" } else { "s" },
            if spec.exempt_clients.is_empty() {
                String::new()
            } else {
                format!(", exempt: {}", spec.exempt_clients.join(", "))
            },
            spec.link
                .as_deref()
                .map_or(String::new(), |link| format!(", link {link}")),
        );
    }
    (out, problems)
}

/// Rows as columns two spaces apart, no trailing spaces.
fn aligned<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < N {
                line.extend(std::iter::repeat_n(
                    ' ',
                    widths[i] - cell.chars().count() + 2,
                ));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
