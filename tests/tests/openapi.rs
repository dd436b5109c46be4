//! `GET /openapi.json` end to end: the real gateway with the library schema, the document's
//! content for the library's rules, and its validity by openapi-spec-validator (Python,
//! pinned in tests/oracle/requirements.txt) against the OpenAPI 3.1 schema. Without that
//! Python the validity tests print one `SKIPPED:` line and pass, unless
//! `PROTOGATE_REQUIRE_ORACLES=1` (set by `make test`): then they fail.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use protogate_tests::library;
use protogate_tests::{Http, proto_source, workspace};
use serde_json::{Value, json};

use crate::external;
use crate::python::{PYTHON_LIMIT, python};

async fn fetch() -> Value {
    let s = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let gw = &s.gw;
    let a = Http::h1().get(gw.addr, "/openapi.json").await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/json"));
    let doc = a.json();
    // Served the same over HTTP/2.
    let b = Http::h2().get(gw.addr, "/openapi.json").await;
    assert_eq!(b.json(), doc);
    doc
}

fn param<'a>(op: &'a Value, name: &str) -> &'a Value {
    op["parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("no parameters in {op}"))
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no parameter {name} in {}", op["parameters"]))
}

fn param_names(op: &Value) -> Vec<&str> {
    op["parameters"]
        .as_array()
        .map(|ps| ps.iter().map(|p| p["name"].as_str().unwrap()).collect())
        .unwrap_or_default()
}

fn book_ref() -> Value {
    json!({ "$ref": "#/components/schemas/library.v1.Book" })
}

#[tokio::test]
async fn document_describes_the_library() {
    let doc = fetch().await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "protogate");
    assert_eq!(doc["info"]["version"], "1");

    // The same document as transcode builds it from the schema: deterministic.
    let schema = library::schema();
    let routes = transcode::rest::Routes::new(&schema, &[]).unwrap();
    assert_eq!(
        transcode::openapi::document(&schema, &routes, "protogate"),
        doc
    );

    let paths = &doc["paths"];
    // GetBook: the template's variable is the path parameter `name`, with its pattern.
    let get = &paths["/v1/{name}"]["get"];
    assert_eq!(get["operationId"], "library.v1.Library.GetBook");
    assert_eq!(get["tags"], json!(["library.v1.Library"]));
    let name = param(get, "name");
    assert_eq!(name["in"], "path");
    assert_eq!(name["required"], true);
    assert_eq!(name["schema"]["type"], "string");
    assert_eq!(name["schema"]["pattern"], "^shelves/[^/]+/books/[^/]+$");
    assert_eq!(
        param_names(get),
        ["name"],
        "GetBookRequest has no other field"
    );
    assert!(get.get("requestBody").is_none());
    let ok = &get["responses"]["200"]["content"];
    assert_eq!(ok["application/json"]["schema"], book_ref());
    assert_eq!(ok["application/msgpack"]["schema"], book_ref());
    assert_eq!(ok["application/x-protobuf"]["schema"]["format"], "binary");
    assert_eq!(
        get["responses"]["default"],
        json!({ "$ref": "#/components/responses/Error" })
    );

    // UpdateBook and DeleteBook share the path (OpenAPI's path of the same shape): PATCH's
    // variable `book.name` takes the name `name` and says which field it sets.
    let patch = &paths["/v1/{name}"]["patch"];
    assert_eq!(patch["operationId"], "library.v1.Library.UpdateBook");
    assert!(
        param(patch, "name")["description"]
            .as_str()
            .unwrap()
            .contains("`book.name`")
    );
    assert_eq!(
        patch["requestBody"]["content"]["application/json"]["schema"],
        book_ref()
    );
    assert!(param_names(patch).contains(&"updateMask"));
    assert_eq!(
        param(patch, "updateMask")["schema"],
        json!({
            "type": "string",
            "format": "field-mask",
            "description": "Comma-separated field paths: `displayName,address.city`.",
        })
    );
    assert_eq!(
        paths["/v1/{name}"]["delete"]["operationId"],
        "library.v1.Library.DeleteBook"
    );
    // A verb stays in the path.
    let archive = &paths["/v1/{name}:archive"]["post"];
    assert_eq!(archive["operationId"], "library.v1.Library.ArchiveBook");
    assert_eq!(
        param_names(archive),
        ["name"],
        "body \"*\": no query parameters"
    );

    // ListBooks: its main binding and the additional one, with the query parameters of the
    // open fields.
    let list = &paths["/v1/{parent}/books"]["get"];
    assert_eq!(list["operationId"], "library.v1.Library.ListBooks");
    let more = &paths["/v1/books"]["get"];
    assert_eq!(more["operationId"], "library.v1.Library.ListBooks.1");
    let names = param_names(list);
    assert_eq!(
        names,
        [
            "parent",
            "pageSize",
            "pageToken",
            "genres",
            "publishedAfter",
            "maxAge",
            "minPages",
            "includeDrafts",
            "ids",
            "filter.author",
            "filter.pages.min",
            "filter.pages.max",
            "cursor",
            "minRating",
            "readMask",
            "big",
            "note",
        ],
        "no `labels` (a map), `parent` only as the path parameter"
    );
    assert_eq!(param(list, "parent")["in"], "path");
    assert_eq!(param(more, "parent")["in"], "query");
    let min = param(list, "filter.pages.min");
    assert_eq!(min["in"], "query");
    assert!(min.get("required").is_none());
    assert_eq!(
        min["schema"],
        json!({ "type": "integer", "format": "int64" })
    );
    assert_eq!(
        param(list, "genres")["schema"],
        json!({ "type": "array", "items": { "$ref": "#/components/schemas/library.v1.Genre" } })
    );
    assert_eq!(
        param(list, "ids")["schema"],
        json!({ "type": "array", "items": { "type": "integer", "format": "int64" } })
    );
    assert_eq!(
        param(list, "publishedAfter")["schema"]["format"],
        "date-time"
    );
    assert_eq!(
        param(list, "minPages")["schema"],
        json!({ "type": "integer", "format": "int64" })
    );
    assert_eq!(
        param(list, "pageSize")["description"],
        "Also accepted as `page_size`."
    );

    // The schemas: int64 as a string, enums as names or numbers, wrappers nullable, maps.
    let schemas = &doc["components"]["schemas"];
    let book = &schemas["library.v1.Book"];
    assert_eq!(book["type"], "object");
    assert_eq!(
        book["properties"]["pages"],
        json!({ "type": "string", "format": "int64" })
    );
    assert_eq!(
        book["properties"]["genre"],
        json!({ "$ref": "#/components/schemas/library.v1.Genre" })
    );
    assert_eq!(
        book["properties"]["labels"],
        json!({ "type": "object", "additionalProperties": { "type": "string" } })
    );
    assert_eq!(book["properties"]["published"]["format"], "date-time");
    assert_eq!(
        book["properties"]["tags"],
        json!({ "type": "array", "items": { "type": "string" } })
    );
    let genre = &schemas["library.v1.Genre"];
    assert_eq!(
        genre["oneOf"][0],
        json!({ "type": "string", "enum": ["GENRE_UNSPECIFIED", "FICTION", "HISTORY"] })
    );
    assert_eq!(genre["oneOf"][1]["type"], "integer");
    let list_req = &schemas["library.v1.ListBooksRequest"]["properties"];
    assert_eq!(
        list_req["minPages"],
        json!({ "type": ["string", "null"], "format": "int64" })
    );
    assert_eq!(list_req["cursor"]["contentEncoding"], "base64");
    assert_eq!(list_req["minRating"]["oneOf"][0]["type"], "number");
    assert_eq!(
        list_req["minRating"]["oneOf"][1]["enum"],
        json!(["NaN", "Infinity", "-Infinity"])
    );
    assert_eq!(
        schemas["library.v1.Filter"]["properties"]["pages"],
        json!({ "$ref": "#/components/schemas/library.v1.Range" })
    );
    assert_eq!(
        schemas["google.rpc.Status"]["properties"]["code"]["type"],
        "integer"
    );
    let error = &doc["components"]["responses"]["Error"]["content"];
    assert_eq!(
        error["application/json"]["schema"],
        json!({ "$ref": "#/components/schemas/google.rpc.Status" })
    );

    // Bodies: a body field, response_body, HttpBody both ways.
    let create = &paths["/v1/{parent}/books"]["post"];
    assert_eq!(
        create["requestBody"]["content"]["application/json"]["schema"],
        book_ref()
    );
    assert_eq!(param_names(create), ["parent", "requestId"]);
    let tags = &paths["/v1/{name}/tags"]["get"]["responses"]["200"]["content"];
    assert_eq!(
        tags["application/json"]["schema"],
        json!({ "type": "array", "items": { "type": "string" } })
    );
    assert!(
        tags.get("application/x-protobuf").is_none(),
        "a repeated field has no protobuf form"
    );
    let ids_body = &paths["/v1/echo/{parent}/ids"]["put"]["requestBody"]["content"];
    assert_eq!(
        ids_body["application/json"]["schema"],
        json!({ "type": "array", "items": { "type": "string", "format": "int64" } })
    );
    assert!(ids_body.get("application/x-protobuf").is_none());
    let cover = &paths["/v1/{name}/cover"];
    assert_eq!(
        cover["get"]["responses"]["200"]["content"],
        json!({ "*/*": { "schema": {
            "type": "string",
            "format": "binary",
            "description": "google.api.HttpBody: the bytes as they are, with their own content type.",
        } } })
    );
    assert_eq!(
        cover["put"]["requestBody"]["content"]["*/*"]["schema"]["format"],
        "binary"
    );
    // Echo's GET binding: `**` (slashes allowed, possibly empty).
    assert_eq!(
        param(&paths["/v1/echo/{parent}"]["get"], "parent")["schema"]["pattern"],
        "^.*$"
    );

    // Streams.
    let watch = &paths["/v1/{parent}/books:watch"]["get"]["responses"]["200"]["content"];
    assert_eq!(
        watch["application/json"]["schema"],
        json!({ "type": "array", "items": book_ref() })
    );
    assert_eq!(watch["application/x-ndjson"]["schema"], book_ref());
    assert_eq!(watch["text/event-stream"]["schema"]["type"], "string");
    assert_eq!(
        watch["application/x-protobuf"]["schema"]["format"],
        "binary"
    );
    let import = &paths["/v1/books:import"]["post"];
    assert_eq!(
        import["requestBody"]["content"]["application/json"]["schema"],
        json!({ "type": "array", "items": book_ref() })
    );
    assert_eq!(
        import["responses"]["200"]["content"]["application/json"]["schema"],
        json!({ "$ref": "#/components/schemas/library.v1.ListBooksResponse" })
    );
    assert!(
        paths["/v1/books:chat"]["post"]["description"]
            .as_str()
            .unwrap()
            .contains("HTTP/2 only")
    );

    // Every method's gRPC path, the unannotated one included.
    for method in ["GetBook", "Unannotated", "WatchBooks", "Chat"] {
        let op = &paths[format!("/library.v1.Library/{method}").as_str()]["post"];
        assert_eq!(
            op["operationId"],
            format!("library.v1.Library.{method}.rpc")
        );
    }
    let rpc = &paths["/library.v1.Library/GetBook"]["post"];
    assert_eq!(
        rpc["requestBody"]["content"]["application/json"]["schema"],
        json!({ "$ref": "#/components/schemas/library.v1.GetBookRequest" })
    );

    // SEARCH, a custom method, is not a path item's field: kept in the extension.
    let search = &doc["x-protogate-custom-methods"]["/v1/echo/{page_token}"]["SEARCH"];
    assert_eq!(search["operationId"], "library.v1.Library.Echo.4");
    assert_eq!(param(search, "page_token")["in"], "path");
    assert!(paths.get("/v1/echo/{page_token}").is_none());
    assert!(doc.get("x-protogate-overlapping-routes").is_none());

    // operationIds are unique.
    let mut ids: Vec<&str> = Vec::new();
    for item in paths.as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            ids.push(op["operationId"].as_str().unwrap());
        }
    }
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate operationIds");
    // 16 methods' gRPC paths + 20 rules' routes less SEARCH.
    assert_eq!(n, 16 + 20 - 1);
}

#[tokio::test]
async fn document_is_valid_openapi_3_1() {
    let Some(py) = python("document_is_valid_openapi_3_1", "openapi_spec_validator") else {
        return;
    };
    let doc = fetch().await;
    let (ok, out) = validate(&py, &doc);
    assert!(
        ok,
        "openapi-spec-validator rejects GET /openapi.json:\n{out}"
    );

    // The check is not vacuous: a path parameter left undeclared, a schema of a wrong type
    // and a document without `info` are each rejected.
    let mut broken = doc.clone();
    broken["paths"]["/v1/{name}"]["get"]
        .as_object_mut()
        .unwrap()
        .remove("parameters");
    let (ok, out) = validate(&py, &broken);
    assert!(!ok, "an undeclared path parameter passed");
    assert!(out.contains("name"), "{out}");

    let mut broken = doc.clone();
    broken["components"]["schemas"]["library.v1.Book"]["type"] = json!("record");
    assert!(
        !validate(&py, &broken).0,
        "a schema of type \"record\" passed"
    );

    let mut broken = doc;
    broken.as_object_mut().unwrap().remove("info");
    assert!(!validate(&py, &broken).0, "a document without info passed");
}

/// Every field kind and well-known type (proto/test/kitchen_sink.proto behind a small service)
/// and the rules OpenAPI cannot hold as they are: a custom method, two routes on one OpenAPI
/// path, a wildcard outside any variable, GET with query parameters down nested messages.
#[test]
fn kitchen_sink_document_is_valid_openapi_3_1() {
    let Some(py) = python(
        "kitchen_sink_document_is_valid_openapi_3_1",
        "openapi_spec_validator",
    ) else {
        return;
    };
    const SERVICE: &str = r#"
        syntax = "proto3";
        package protogate.test.v1;
        import "kitchen_sink.proto";
        service Sink {
          rpc Put(KitchenSink) returns (KitchenSink);
          rpc Get(KitchenSink) returns (stream KitchenSink);
          rpc Both(stream KitchenSink) returns (stream KitchenSink);
        }
    "#;
    let files = proto_source("test");
    let schema = transcode::Schema::compile(&["sink.proto".to_owned()], move |name| {
        if name == "sink.proto" {
            Some(SERVICE.to_owned())
        } else {
            files(name)
        }
    })
    .expect("kitchen sink compiles");
    let rule = |selector: &str, method: &str, path: &str, body: &str| transcode::rest::HttpRule {
        selector: selector.into(),
        method: method.into(),
        path: path.into(),
        body: body.into(),
        ..Default::default()
    };
    let mut get = rule(
        "protogate.test.v1.Sink.Get",
        "GET",
        "/v1/{f_string=sinks/*}",
        "",
    );
    get.additional_bindings = vec![
        rule("", "GET", "/v1/{f_string=others/*}", ""),
        rule("", "GET", "/v1/*/x/{f_nested.b}", ""),
        rule("", "SEARCH", "/v1/sinks", ""),
    ];
    let rules = [
        get,
        rule(
            "protogate.test.v1.Sink.Put",
            "PUT",
            "/v1/{f_string=sinks/*}",
            "*",
        ),
        rule("protogate.test.v1.Sink.Both", "POST", "/v1/sinks:both", "*"),
    ];
    let routes = transcode::rest::Routes::new(&schema, &rules).expect("rules");
    let doc = transcode::openapi::document(&schema, &routes, "kitchen sink");
    assert!(doc["x-protogate-custom-methods"]["/v1/sinks"]["SEARCH"].is_object());
    assert!(doc["x-protogate-overlapping-routes"]["/v1/{f_string=others/*}"]["get"].is_object());
    assert!(doc["paths"]["/v1/{_1}/x/{f_nested.b}"]["get"].is_object());
    let sink = &doc["components"]["schemas"]["protogate.test.v1.KitchenSink"];
    assert!(sink["properties"].as_object().unwrap().len() > 50, "{sink}");

    let (ok, out) = validate(&py, &doc);
    assert!(
        ok,
        "openapi-spec-validator rejects the kitchen sink's document:\n{out}"
    );
}

// --- the validator ------------------------------------------------------------------------------

/// Runs tests/oracle/validate_openapi.py on `doc`: (valid, what it printed).
fn validate(py: &str, doc: &Value) -> (bool, String) {
    let script = workspace().join("tests/oracle/validate_openapi.py");
    let out = external::output(
        Command::new(py).arg(&script),
        Some(serde_json::to_vec(doc).unwrap()),
        PYTHON_LIMIT,
    )
    .unwrap_or_else(|e| panic!("cannot run {py} {}: {e}", script.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "validate_openapi.py failed to run ({}):\n{text}",
        out.status
    );
    (out.status.success(), text)
}

/// Without openapi-spec-validator the validity tests skip with one line, unless oracles are
/// required: this test binary, run again on one of them with an interpreter that is not there.
#[test]
fn a_missing_validator_skips_loudly_or_fails_when_required() {
    assert!(external::oracles_required(Some("1")));
    assert!(!external::oracles_required(None));
    assert!(!external::oracles_required(Some("")));
    assert!(!external::oracles_required(Some("0")));
    let test = "kitchen_sink_document_is_valid_openapi_3_1";
    external::assert_missing_oracle_skips_or_fails(
        test,
        ("PROTOGATE_ORACLE_PYTHON", "/nonexistent/python3"),
        &format!("{test}: Python \"/nonexistent/python3\" cannot be run"),
        "oracle-env",
        PYTHON_LIMIT,
    );
}
