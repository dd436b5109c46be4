//! Hot reload through the binary: a `.proto` rewritten on disk is served
//! without a restart while sequential calls run across the change (every answer checked); a
//! broken one leaves the old schema serving and is counted; SIGHUP reloads; what only a
//! restart changes is named; `/admin/schema` and `protogate_schema_info` follow the swap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{PROTO_DIR, Proc, Scratch, eventually, get_order, http, metric, replace, shop};

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[test]
fn a_rewritten_proto_is_served_without_a_restart_and_a_broken_one_is_not() {
    let shop = shop();
    let scratch = Scratch::new("reload");
    let v1 = std::fs::read_to_string(format!("{PROTO_DIR}/demo/v1/shop.proto")).unwrap();
    let v2 = std::fs::read_to_string(format!("{PROTO_DIR}/demo/v2/shop.proto")).unwrap();
    let proto = scratch.file("shop.proto", &v1);
    let config = scratch.file(
        "gw.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nupstream = \"http://{}\"\nprotos = [\"{proto}\"]\nincludes = [\"{}\", \"{PROTO_DIR}\"]\n",
            shop.addr,
            scratch.0.display()
        ),
    );
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    let first = get_order(addr);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(!body(&first).contains("loyaltyPoints"), "{first}");
    let digest = metric(addr, "protogate_schema_info{").unwrap();

    // Sequential calls run across the change: every one answers 200 with the order, first
    // without the field v1 does not know, then with it, never going back.
    replace(&proto, &v2);
    let mut calls = 0;
    let renamed = eventually("the v2 schema to be served", || {
        let answer = get_order(addr);
        calls += 1;
        assert!(answer.starts_with("HTTP/1.1 200"), "call {calls}: {answer}");
        assert!(
            body(&answer).contains(r#""id":"2""#),
            "call {calls}: {answer}"
        );
        body(&answer)
            .contains(r#""loyaltyPoints":"89""#)
            .then_some(answer)
    });
    assert!(renamed.is_some(), "{}", gw.log().join("\n"));
    for _ in 0..20 {
        let answer = get_order(addr);
        assert!(
            body(&answer).contains(r#""loyaltyPoints":"89""#),
            "{answer}"
        );
    }
    let line = gw.wait_for_line("configuration reloaded");
    assert!(line.contains("a watched file changed"), "{line}");
    // v2 has no REST annotations: the routes went, the methods stayed (their types too).
    assert!(
        line.contains("methods added: none; removed: none; changed: none"),
        "{line}"
    );
    assert_eq!(
        metric(addr, "protogate_schema_reloads_total{result=\"ok\"}").as_deref(),
        Some("protogate_schema_reloads_total{result=\"ok\"} 1")
    );
    let now = metric(addr, "protogate_schema_info{").unwrap();
    assert_ne!(now, digest, "the digest did not change");
    let schema = http(addr, "GET", "/admin/schema", "", b"");
    let doc: serde_json::Value = serde_json::from_str(body(&schema)).unwrap();
    assert!(now.contains(doc["digest"].as_str().unwrap()), "{now} {doc}");
    assert_eq!(doc["routes"].as_array().unwrap().len(), 0, "{doc}");
    assert_eq!(doc["services"][0]["name"], "demo.shop.v1.Shop", "{doc}");
    assert_eq!(
        doc["services"][0]["methods"].as_array().unwrap().len(),
        4,
        "{doc}"
    );

    // A file that does not compile: logged, counted, and the running schema stays.
    replace(&proto, "syntax = \"proto3\";\nmessage Broken {\n");
    let line = gw.wait_for_line("reload failed");
    assert!(line.contains("shop.proto"), "{line}");
    assert!(metric(addr, "protogate_schema_reloads_total{result=\"failed\"} 1").is_some());
    let answer = get_order(addr);
    assert!(
        body(&answer).contains(r#""loyaltyPoints":"89""#),
        "{answer}"
    );

    // Fixed again, with a new method: added, named in the log.
    let v3 = v2.replace(
        "  rpc GetOrder(GetOrderRequest) returns (Order);",
        "  rpc GetOrder(GetOrderRequest) returns (Order);\n  rpc PeekOrder(GetOrderRequest) returns (Order);",
    );
    replace(&proto, &v3);
    let added = eventually("the added method in the log", || {
        gw.log()
            .into_iter()
            .find(|l| l.contains("methods added: demo.shop.v1.Shop/PeekOrder"))
    });
    assert!(added.is_some(), "{}", gw.log().join("\n"));
    // The shop does not serve it: the upstream's UNIMPLEMENTED, not the gateway's 404.
    let answer = http(
        addr,
        "POST",
        "/demo.shop.v1.Shop/PeekOrder",
        "application/json",
        b"{}",
    );
    assert!(answer.contains("\"code\":12"), "{answer}");

    // SIGHUP reloads too; a changed listen address is named as needing a restart.
    replace(
        &config,
        &std::fs::read_to_string(&config)
            .unwrap()
            .replace("listen = \"127.0.0.1:0\"", "listen = \"127.0.0.1:1\""),
    );
    let restart = eventually("the restart warning", || {
        gw.log()
            .into_iter()
            .find(|l| l.contains("in force only after a restart: listen"))
    });
    assert!(restart.is_some(), "{}", gw.log().join("\n"));
    gw.signal("-HUP");
    let reloaded = eventually("the SIGHUP reload", || {
        gw.log()
            .into_iter()
            .find(|l| l.contains("configuration reloaded") && l.contains("SIGHUP"))
    });
    assert!(reloaded.is_some(), "{}", gw.log().join("\n"));
    assert!(get_order(addr).starts_with("HTTP/1.1 200"));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// A ConfigMap as Kubernetes mounts it: the files are symlinks through `..data`, and an
/// update writes a new timestamped directory and swaps `..data` to it, with no event on the
/// files themselves. The gateway reloads all the same.
#[cfg(unix)]
#[test]
fn a_configmap_update_by_symlink_swap_is_picked_up() {
    use std::os::unix::fs::symlink;
    let shop = shop();
    let scratch = Scratch::new("configmap");
    let v1 = std::fs::read_to_string(format!("{PROTO_DIR}/demo/v1/shop.proto")).unwrap();
    let v2 = std::fs::read_to_string(format!("{PROTO_DIR}/demo/v2/shop.proto")).unwrap();
    let mount = scratch.0.join("config");
    let write_version = |name: &str, proto: &str| {
        let dir = mount.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("shop.proto"), proto).unwrap();
        std::fs::write(
            dir.join("gw.toml"),
            format!(
                "listen = \"127.0.0.1:0\"\nupstream = \"http://{}\"\nprotos = [\"shop.proto\"]\nincludes = [\".\", \"{PROTO_DIR}\"]\n",
                shop.addr
            ),
        )
        .unwrap();
    };
    write_version("..2026_12_01_a", &v1);
    symlink("..2026_12_01_a", mount.join("..data")).unwrap();
    symlink("..data/gw.toml", mount.join("gw.toml")).unwrap();
    symlink("..data/shop.proto", mount.join("shop.proto")).unwrap();
    let config = mount.join("gw.toml").display().to_string();
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    assert!(!body(&get_order(addr)).contains("loyaltyPoints"));
    // The update, as kubelet's atomic writer does it: new directory, new link, renamed over.
    write_version("..2026_12_01_b", &v2);
    symlink("..2026_12_01_b", mount.join("..data_tmp")).unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    let served = eventually("the new ConfigMap's schema", || {
        body(&get_order(addr))
            .contains(r#""loyaltyPoints":"89""#)
            .then_some(())
    });
    assert!(served.is_some(), "{}", gw.log().join("\n"));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}
