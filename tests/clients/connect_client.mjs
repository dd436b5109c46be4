// connect-node (Connect, gRPC-Web and gRPC clients no one here wrote) against protogate: unary
// calls with fields the gateway's schema lacks, a server stream, an error with details and
// metadata, deadlines both ways, metadata both ways, and client and bidirectional streams, on
// each transport named (all of them when none is):
//
//     node connect_client.mjs SVC_ADDR SVC_DESCRIPTORS LIBRARY_ADDR LIBRARY_DESCRIPTORS [TRANSPORT...]
//
// ADDR is host:port, spoken in plain HTTP (h2c for HTTP/2). The descriptor sets are binary
// google.protobuf.FileDescriptorSet files of the backends' schemas (the test service's v2,
// which knows fields the gateway's v1 lacks); services and messages come from them at run
// time, no generated code. Transports: connect-json-h1, connect-json-h2, connect-proto-h1,
// connect-proto-h2, grpc-web-h1, grpc-web-h2, grpc-h2. Prints `ok TRANSPORT CHECK` per check
// passed, `FAIL TRANSPORT CHECK: DETAIL` and exits 1 at the first that fails, and
// `all checks passed` at the end.

import { readFileSync } from "node:fs";

import { create, createFileRegistry, equals, fromBinary, toJsonString } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";

const TRANSPORTS = {
  "connect-json-h1": (baseUrl) =>
    createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
  "connect-json-h2": (baseUrl) =>
    createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: false }),
  "connect-proto-h1": (baseUrl) =>
    createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
  "connect-proto-h2": (baseUrl) =>
    createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true }),
  "grpc-web-h1": (baseUrl) =>
    createGrpcWebTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
  "grpc-web-h2": (baseUrl) =>
    createGrpcWebTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true }),
  "grpc-h2": (baseUrl) => createGrpcTransport({ baseUrl, httpVersion: "2" }),
};
// JSON transports: the gateway converts JSON with its own (v1) schema, so v2 fields are
// refused rather than carried.
const JSON_TRANSPORTS = new Set(["connect-json-h1", "connect-json-h2"]);
// Transports that can stream from the client: gRPC-Web cannot, nor can anything on HTTP/1.1.
const CLIENT_STREAMING = new Set(["grpc-h2", "connect-json-h2", "connect-proto-h2"]);

// Every call not about deadlines gets this one, so a hung call fails instead of hanging.
const CALL_TIMEOUT_MS = 10_000;

function usage(message) {
  console.error(message);
  console.error(
    "usage: node connect_client.mjs SVC_ADDR SVC_DESCRIPTORS LIBRARY_ADDR LIBRARY_DESCRIPTORS [TRANSPORT...]",
  );
  console.error(`transports: ${Object.keys(TRANSPORTS).join(" ")}`);
  process.exit(2);
}

function registry(path) {
  return createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(path)));
}

function message(reg, typeName) {
  const desc = reg.getMessage(typeName);
  if (!desc) throw new Error(`${typeName} is not in the descriptor set`);
  return desc;
}

function service(reg, typeName) {
  const desc = reg.getService(typeName);
  if (!desc) throw new Error(`${typeName} is not in the descriptor set`);
  return desc;
}

// A failed expectation: its message is the FAIL line's detail.
class CheckFailed extends Error {}

function expect(condition, detail) {
  if (!condition) throw new CheckFailed(typeof detail === "function" ? detail() : detail);
}

function show(schema, msg, reg) {
  try {
    return toJsonString(schema, msg, { registry: reg });
  } catch {
    return String(msg);
  }
}

function showError(e) {
  if (e instanceof ConnectError) {
    const metadata = [...e.metadata.entries()].map(([k, v]) => `${k}: ${v}`).join(", ");
    return `ConnectError ${Code[e.code]} (${e.code}) ${JSON.stringify(e.rawMessage)}; metadata {${metadata}}; ${e.details.length} detail(s)${e.cause ? `; cause ${e.cause}` : ""}`;
  }
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

// Runs a call expected to fail; answers its ConnectError, or fails the check.
async function failure(call) {
  try {
    const got = await call();
    throw new CheckFailed(`it succeeded: ${JSON.stringify(got, (_, v) => (typeof v === "bigint" ? `${v}` : v))}`);
  } catch (e) {
    if (e instanceof CheckFailed) throw e;
    if (!(e instanceof ConnectError)) throw new CheckFailed(`not a ConnectError: ${showError(e)}`);
    return e;
  }
}

async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

async function* each(items) {
  for (const item of items) yield item;
}

async function runTransport(name, env) {
  const { svcReg, libReg, svcAddr, libAddr } = env;
  const Thing = message(svcReg, "protogate.test.svc.Thing");
  const FailRequest = message(svcReg, "protogate.test.svc.FailRequest");
  const SlowRequest = message(svcReg, "protogate.test.svc.SlowRequest");
  const BadRequest = message(svcReg, "google.rpc.BadRequest");
  const Book = message(libReg, "library.v1.Book");
  const ListBooksResponse = message(libReg, "library.v1.ListBooksResponse");

  const svc = createClient(
    service(svcReg, "protogate.test.svc.TestService"),
    TRANSPORTS[name](`http://${svcAddr}`),
  );
  const lib = createClient(service(libReg, "library.v1.Library"), TRANSPORTS[name](`http://${libAddr}`));

  const json = JSON_TRANSPORTS.has(name);
  const check = async (what, fn) => {
    try {
      await fn();
    } catch (e) {
      const detail = e instanceof CheckFailed ? e.message : `unexpected ${showError(e)}`;
      console.log(`FAIL ${name} ${what}: ${detail}`);
      process.exit(1);
    }
    console.log(`ok ${name} ${what}`);
  };

  // In protobuf, the fields only the backend's schema (v2) knows survive the gateway (v1).
  const thing = create(Thing, {
    id: 7n,
    name: "seven",
    price: 1.5,
    parts: [{ id: 1n, label: "a", ...(json ? {} : { note: "v2 note" }) }],
    ...(json ? {} : { secretV2: "hidden" }),
  });
  const options = { timeoutMs: CALL_TIMEOUT_MS };

  await check(json ? "unary" : "unary-v2-fields", async () => {
    const got = await svc.echo(thing, options);
    expect(equals(Thing, got, thing), () => `got ${show(Thing, got)}, sent ${show(Thing, thing)}`);
  });

  if (json) {
    await check("unary-v2-field-json-rejected", async () => {
      const v2 = create(Thing, { id: 7n, name: "seven", secretV2: "hidden" });
      const e = await failure(() => svc.echo(v2, options));
      expect(
        e.code === Code.InvalidArgument && /secret_v2|secretV2/.test(e.rawMessage),
        () => showError(e),
      );
    });
  }

  await check("server-stream", async () => {
    const got = await collect(svc.watch(thing, options));
    expect(
      got.length === 2 && got.every((m) => equals(Thing, m, thing)),
      () => `got ${got.length}: [${got.map((m) => show(Thing, m)).join(", ")}]`,
    );
  });

  await check("error-details", async () => {
    const request = create(FailRequest, { code: 5, message: "no such thing", badField: "thing.id" });
    const e = await failure(() => svc.fail(request, options));
    expect(e.code === Code.NotFound && e.rawMessage === "no such thing", () => showError(e));
    const bad = e.findDetails(BadRequest);
    expect(
      bad.length === 1 && bad[0].fieldViolations.some((v) => v.field === "thing.id"),
      () => `BadRequest details: [${bad.map((b) => show(BadRequest, b)).join(", ")}] of ${showError(e)}`,
    );
    expect(e.metadata.get("x-failure-id") === "f-17", () => `metadata: ${showError(e)}`);
  });

  await check("deadline-exceeded", async () => {
    const request = create(SlowRequest, { delay: { seconds: 30n } });
    const start = Date.now();
    const e = await failure(() => svc.slow(request, { timeoutMs: 500 }));
    const elapsed = Date.now() - start;
    expect(e.code === Code.DeadlineExceeded, () => showError(e));
    expect(elapsed < 5_000, `it took ${elapsed} ms`);
  });

  await check("timeout-propagated", async () => {
    const got = await svc.slow(create(SlowRequest, { delay: { seconds: 0n } }), { timeoutMs: 5_000 });
    expect(got.name !== "", () => `got ${show(Thing, got)}`);
  });

  await check("metadata", async () => {
    let served;
    const got = await svc.metadata(create(Thing), {
      ...options,
      headers: { "x-custom": "yes" },
      onHeader: (headers) => {
        served = headers.get("x-served-by");
      },
    });
    expect(Object.hasOwn(got.counts, "x-custom=yes"), () => `backend saw ${Object.keys(got.counts).join(", ")}`);
    expect(served === "backend-v2", `x-served-by: ${served}`);
  });

  if (CLIENT_STREAMING.has(name)) {
    const books = [0, 1, 2, 3, 4].map((i) =>
      create(Book, { name: `shelves/1/books/${i}`, title: `book ${i}` }),
    );

    await check("client-stream", async () => {
      const got = await lib.importBooks(each(books), options);
      expect(
        got.nextPageToken === "5" &&
          got.books.length === books.length &&
          got.books.every((b, i) => equals(Book, b, books[i])),
        () => `got ${show(ListBooksResponse, got)}`,
      );
    });

    await check("bidi-stream", async () => {
      const got = (await collect(lib.chat(each(books), options))).map((b) => b.title);
      const want = books.map((b) => b.title.toUpperCase());
      expect(
        got.length === want.length && got.every((t, i) => t === want[i]),
        () => `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`,
      );
    });
  }
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length < 4) usage("missing arguments");
  const [svcAddr, svcDescriptors, libAddr, libDescriptors, ...names] = args;
  const transports = names.length > 0 ? names : Object.keys(TRANSPORTS);
  for (const t of transports) if (!(t in TRANSPORTS)) usage(`unknown transport ${t}`);
  const env = { svcAddr, libAddr, svcReg: registry(svcDescriptors), libReg: registry(libDescriptors) };
  for (const t of transports) await runTransport(t, env);
  console.log("all checks passed");
  // HTTP/2 sessions linger until their idle timeout; nothing is left to wait for.
  process.exit(0);
}

main().catch((e) => {
  console.log(`FAIL setup: ${showError(e)}`);
  process.exit(1);
});
