//! An OpenAPI 3.1 document of what the gateway serves, generated from the schema and its HTTP
//! rules: every rule's route (path variables and query parameters as parameters, the body and
//! `response_body` as the request and response schemas) and the `POST /pkg.Service/Method`
//! route of every method. `components.schemas` holds one schema per message and enum that an
//! operation reaches, in the JSON mapping's shape (json names, 64-bit integers as strings,
//! bytes as base64, enums as names or numbers, the well-known types' JSON forms).
//!
//! What OpenAPI cannot say is kept in extensions: routes of custom HTTP methods (`SEARCH`) under
//! `x-protogate-custom-methods`, and routes whose path an earlier route of the same HTTP method
//! already takes in OpenAPI's terms (`/v1/{name=shelves/*}` and `/v1/{name=authors/*}` are both
//! `/v1/{name}`) under `x-protogate-overlapping-routes`, keyed by their template.
//!
//! The output is deterministic: the same schema and routes give the same document.

mod comments;
mod ids;
mod operations;
mod paths;
mod query;
mod schemas;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::rest::Routes;
use crate::{Method, Schema};

use ids::OperationIds;
use paths::{Paths, convert_path};
use schemas::Generator;

const STATUS: &str = "google.rpc.Status";

/// The HTTP methods an OpenAPI path item has a field for (as `google.api.http` spells them).
const OPENAPI_METHODS: &[&str] = &[
    "GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE",
];

/// The OpenAPI 3.1 document of `routes` (built from `schema`) and of every method's
/// `POST /pkg.Service/Method` route.
pub fn document(schema: &Schema, routes: &Routes, title: &str) -> Value {
    let mut g = Generator::default();
    let mut methods: Vec<&Method> = schema.methods().collect();
    methods.sort_by(|a, b| a.full_name.cmp(&b.full_name));
    let ids = OperationIds::new(schema, routes, &methods);

    let mut paths = Paths::default();
    // The gRPC paths first, by the one precedence (`Routes::resolve`: `POST
    // /pkg.Service/Method` is the method before any rule), so a rule with that very path is the
    // one shadowed.
    for m in &methods {
        let path = format!("/{}", m.full_name);
        let op = g.operation(m, None, &ids.rpc[&*m.full_name], &[]);
        paths.insert(&path, &path, Vec::new(), "post", op);
    }
    let mut custom: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut overlapping: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (i, route) in routes.iter().enumerate() {
        let converted = convert_path(&route.rule.path);
        let own: Vec<String> = converted.vars.iter().map(|v| v.name.clone()).collect();
        let id = &ids.routes[i];
        if !OPENAPI_METHODS.contains(&route.rule.method.as_str()) {
            let op = g.operation(&route.method, Some((route, &converted)), id, &own);
            custom
                .entry(converted.path)
                .or_default()
                .insert(route.rule.method.clone(), op);
            continue;
        }
        let method = route.rule.method.to_ascii_lowercase();
        let (path, names) = paths.key_for(&converted);
        // A rule the router never reaches (`Routes::resolve` sends a request on a gRPC path
        // to its method first) is listed with the overlapping ones, as is one whose path and
        // method an earlier entry took.
        let unreachable = converted.vars.is_empty()
            && matches!(
                routes.resolve(schema, &route.rule.method, &route.rule.path),
                crate::rest::Resolution::Found(r) if r.rule.is_none()
            );
        if unreachable || paths.taken(&path, &method) {
            let op = g.operation(&route.method, Some((route, &converted)), id, &own);
            overlapping
                .entry(route.rule.path.clone())
                .or_default()
                .insert(method, op);
        } else {
            let op = g.operation(&route.method, Some((route, &converted)), id, &names);
            paths.insert(&path, &converted.shape, names, &method, op);
        }
    }

    let error = g.error_response(schema.message(STATUS));
    let mut tags: Vec<&str> = methods.iter().map(|m| &*m.service).collect();
    tags.dedup();
    let tags: Vec<Value> = tags
        .into_iter()
        .map(|name| {
            let mut tag = json!({ "name": name });
            let service = methods
                .iter()
                .find(|m| &*m.service == name)
                .map(|m| m.descriptor.parent_service());
            if let Some(s) = service
                && let Some(c) = g.comments.get(&s.parent_file(), s.path())
            {
                tag["description"] = c.into();
            }
            tag
        })
        .collect();

    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": "1",
            "description": "Generated by protogate from the loaded schema and its HTTP rules. \
                Bodies are application/json (the proto3 JSON mapping), application/msgpack \
                (the same shape) or application/x-protobuf, by Content-Type and Accept; \
                request bodies and query parameters take proto field names as well as the \
                JSON names shown. Errors are google.rpc.Status.",
        },
        "tags": tags,
        "paths": paths.into_value(),
    });
    let schemas = g.finish();
    doc["components"] = json!({
        "schemas": schemas,
        "responses": { "Error": error },
    });
    if !custom.is_empty() {
        doc["x-protogate-custom-methods"] = json!(custom);
    }
    if !overlapping.is_empty() {
        doc["x-protogate-overlapping-routes"] = json!(overlapping);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::HttpRule;

    const PROTO: &str = r#"
        syntax = "proto3";
        package t.v1;
        import "google/protobuf/empty.proto";
        import "google/protobuf/struct.proto";
        import "google/protobuf/wrappers.proto";

        enum Color { COLOR_UNSPECIFIED = 0; RED = 1; }

        // A tree.
        message Node {
          string id = 1;
          Node child = 2;
          repeated Node children = 3;
          map<int64, Color> colors = 4;
          oneof pick { string a = 5; int32 b = 6; }
          google.protobuf.Struct meta = 7;
          google.protobuf.Value any_value = 8;
          google.protobuf.NullValue nothing = 9;
          google.protobuf.DoubleValue score = 10;
          string old = 11 [deprecated = true];
          map<bool, string> flags = 12;
          uint32 small = 13;
        }

        message Page { int32 size = 1; Node where = 2; }

        service Tree {
          rpc Get(Node) returns (Node);
          rpc List(Page) returns (stream Node);
          rpc Ping(google.protobuf.Empty) returns (google.protobuf.Empty);
        }
    "#;

    fn rule(selector: &str, method: &str, path: &str) -> HttpRule {
        HttpRule {
            selector: selector.into(),
            method: method.into(),
            path: path.into(),
            ..HttpRule::default()
        }
    }

    fn doc() -> Value {
        let schema = Schema::compile(&["t.proto".to_owned()], |name| {
            (name == "t.proto").then(|| PROTO.to_owned())
        })
        .unwrap();
        let mut get = rule("t.v1.Tree.Get", "GET", "/v1/{id=nodes/*}");
        get.additional_bindings = vec![
            // The same OpenAPI path and method as the first: an overlapping route.
            rule("", "GET", "/v1/{id=roots/*}"),
            rule("", "SEARCH", "/v1/nodes"),
            rule("", "GET", "/v1/*/things/{child.id}"),
        ];
        let rules = [get, rule("t.v1.Tree.List", "GET", "/v1/pages/{size}")];
        let routes = Routes::new(&schema, &rules).unwrap();
        let doc = document(&schema, &routes, "t");
        assert_eq!(document(&schema, &routes, "t"), doc);
        assert_eq!(
            document(&schema, &routes, "t").to_string(),
            doc.to_string(),
            "deterministic"
        );
        doc
    }

    fn names(op: &Value) -> Vec<&str> {
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn operations_parameters_and_extensions() {
        let doc = doc();
        let paths = &doc["paths"];
        // Configured rules (not annotations) are numbered in the routes' order, most specific
        // first.
        let get = &paths["/v1/{id}"]["get"];
        assert_eq!(get["operationId"], "t.v1.Tree.Get.1");
        // Recursive and repeated messages, maps, Struct and Value are no query parameters.
        assert_eq!(
            names(get),
            ["id", "a", "b", "nothing", "score", "old", "small"]
        );
        let score = &get["parameters"][4];
        assert_eq!(score["schema"]["oneOf"][0]["format"], "double");
        assert_eq!(get["parameters"][5]["deprecated"], true);
        assert_eq!(
            doc["x-protogate-overlapping-routes"]["/v1/{id=roots/*}"]["get"]["operationId"],
            "t.v1.Tree.Get.2"
        );
        assert_eq!(
            doc["x-protogate-custom-methods"]["/v1/nodes"]["SEARCH"]["operationId"],
            "t.v1.Tree.Get"
        );
        let things = &paths["/v1/{_1}/things/{child.id}"]["get"];
        assert_eq!(things["operationId"], "t.v1.Tree.Get.3");
        assert_eq!(&names(things)[..3], ["_1", "child.id", "id"]);
        assert_eq!(things["parameters"][0]["in"], "path");

        // A server stream: nested fields dotted, the recursion cut at the repeated type.
        let list = &paths["/v1/pages/{size}"]["get"];
        assert_eq!(list["parameters"][0]["schema"]["type"], "integer");
        assert_eq!(names(list)[..3], ["size", "where.id", "where.a"]);
        assert!(!names(list).iter().any(|n| n.starts_with("where.child")));
        let content = &list["responses"]["200"]["content"];
        assert_eq!(
            content["application/json"]["schema"]["items"]["$ref"],
            "#/components/schemas/t.v1.Node"
        );
        assert!(content.get("text/event-stream").is_some());

        let ping = &paths["/t.v1.Tree/Ping"]["post"];
        assert_eq!(ping["operationId"], "t.v1.Tree.Ping.rpc");
        assert_eq!(
            ping["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/google.protobuf.Empty"
        );
        assert_eq!(doc["tags"], json!([{ "name": "t.v1.Tree" }]));
    }

    #[test]
    fn message_schemas() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        let node = &schemas["t.v1.Node"];
        let p = &node["properties"];
        assert_eq!(p["child"]["$ref"], "#/components/schemas/t.v1.Node");
        assert_eq!(
            p["colors"],
            json!({
                "type": "object",
                "additionalProperties": { "$ref": "#/components/schemas/t.v1.Color" },
                "propertyNames": { "pattern": "^-?[0-9]+$" },
            })
        );
        assert_eq!(
            p["flags"]["propertyNames"],
            json!({ "enum": ["true", "false"] })
        );
        assert!(
            p["a"]["description"]
                .as_str()
                .unwrap()
                .contains("oneof `pick`")
        );
        assert_eq!(p["meta"], json!({ "type": "object" }));
        assert!(p["anyValue"].get("type").is_none());
        assert_eq!(p["nothing"], json!({ "type": "null" }));
        assert_eq!(p["score"]["oneOf"][2], json!({ "type": "null" }));
        assert_eq!(p["old"]["deprecated"], true);
        assert_eq!(p["small"]["maximum"], u32::MAX);
        assert_eq!(
            schemas["t.v1.Color"]["oneOf"][0]["enum"],
            json!(["COLOR_UNSPECIFIED", "RED"])
        );
        assert_eq!(
            schemas["google.protobuf.Empty"],
            json!({ "type": "object", "properties": {} })
        );

        // Every reference resolves.
        fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r);
                    }
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let pointer = r.strip_prefix('#').unwrap();
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }
}
