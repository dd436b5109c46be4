//! The document `/admin/migration.json` gives (`version` 1), as this view reads it.
//! Lenient: fields a gateway may add are ignored; fields this view can do without default.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Deserialize)]
pub(super) struct Document {
    #[serde(default)]
    pub(super) generated_at: Option<String>,
    #[serde(default)]
    pub(super) max_clients: Option<u64>,
    #[serde(default)]
    pub(super) tracked_clients: Option<u64>,
    pub(super) methods: Vec<Method>,
}

pub(super) type Mix = BTreeMap<String, BTreeMap<String, u64>>;

#[derive(Deserialize)]
pub(super) struct Method {
    pub(super) method: String,
    pub(super) requests: u64,
    pub(super) json_answers: u64,
    #[serde(default)]
    pub(super) json_share: Option<f64>,
    #[serde(default)]
    pub(super) format_mix: Mix,
    #[serde(default)]
    pub(super) downgrades: BTreeMap<String, u64>,
    #[serde(default)]
    pub(super) json_refused: BTreeMap<String, u64>,
    #[serde(default)]
    pub(super) exempt: u64,
    /// Requests by client protocol (`http`, `grpc`, `grpc-web`, `connect`).
    #[serde(default)]
    pub(super) protocols: BTreeMap<String, u64>,
    #[serde(default)]
    pub(super) clients: Vec<Client>,
    #[serde(default)]
    pub(super) other: Option<Other>,
    #[serde(default)]
    pub(super) unknown_fields: Vec<Field>,
    #[serde(default)]
    pub(super) unknown_fields_other: u64,
    #[serde(default)]
    pub(super) json_share_24h: Option<Series>,
    #[serde(default)]
    pub(super) cost: Option<Cost>,
    #[serde(default)]
    pub(super) sunset: Option<Sunset>,
}

#[derive(Deserialize)]
pub(super) struct Client {
    pub(super) name: String,
    #[serde(default)]
    pub(super) versions: Vec<Version>,
    pub(super) requests: u64,
    pub(super) json_answers: u64,
    #[serde(default)]
    pub(super) json_share: Option<f64>,
    #[serde(default)]
    pub(super) last_seen: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Version {
    pub(super) version: String,
}

#[derive(Deserialize)]
pub(super) struct Other {
    pub(super) requests: u64,
    pub(super) json_answers: u64,
    #[serde(default)]
    pub(super) json_share: Option<f64>,
    #[serde(default)]
    pub(super) evicted_clients: u64,
}

#[derive(Deserialize)]
pub(super) struct Field {
    #[serde(default)]
    pub(super) path: String,
    pub(super) number: u64,
    pub(super) drops: u64,
    #[serde(default)]
    pub(super) last_seen: Option<String>,
    #[serde(default)]
    pub(super) clients: Vec<FieldClient>,
}

#[derive(Deserialize)]
pub(super) struct FieldClient {
    pub(super) name: String,
    pub(super) drops: u64,
}

#[derive(Deserialize)]
pub(super) struct Series {
    #[serde(default)]
    pub(super) step_seconds: Option<u64>,
    pub(super) requests: Vec<u64>,
    pub(super) json_answers: Vec<u64>,
}

#[derive(Deserialize)]
pub(super) struct Cost {
    #[serde(default)]
    pub(super) summary: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Sunset {
    #[serde(default)]
    pub(super) selector: String,
    pub(super) phase: String,
    #[serde(default)]
    pub(super) deprecation: Option<String>,
    #[serde(default)]
    pub(super) sunset: Option<String>,
    #[serde(default)]
    pub(super) link: Option<String>,
    #[serde(default)]
    pub(super) brownouts: Vec<Window>,
    #[serde(default)]
    pub(super) next_brownout: Option<Window>,
    #[serde(default)]
    pub(super) exempt_clients: Vec<String>,
}

#[derive(Deserialize)]
pub(super) struct Window {
    pub(super) start: String,
    pub(super) end: String,
}
