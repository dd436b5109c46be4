"""Python grpcio (a gRPC client no one here wrote) against protogate: every call shape,
metadata both ways, deadlines, status details, an unknown field surviving both ways, and a
method the gateway lacks. Run by tests/tests/grpc_clients.rs, which starts the backends and
the gateways:

    python grpcio_client.py SVC_DESCRIPTORS SVC_ADDR LIBRARY_DESCRIPTORS LIBRARY_ADDR

The descriptor sets are the backends' schemas (the test service's v2, which knows fields the
gateway's v1 lacks); messages are built from them at run time, no generated code. Prints one
line per check and exits non-zero at the first that fails.
"""

import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def classes(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def check(what, ok, detail=""):
    if not ok:
        print(f"FAIL {what}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok {what}", flush=True)


def unary(channel, path, cls_out):
    return channel.unary_unary(
        path,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=cls_out.FromString,
    )


def main():
    svc_fds, svc_addr, lib_fds, lib_addr = sys.argv[1:5]
    svc = classes(svc_fds)
    lib = classes(lib_fds)
    Thing, Part = svc("protogate.test.svc.Thing"), svc("protogate.test.svc.Part")
    FailRequest = svc("protogate.test.svc.FailRequest")
    SlowRequest = svc("protogate.test.svc.SlowRequest")
    Status = svc("google.rpc.Status")
    BadRequest = svc("google.rpc.BadRequest")
    Book = lib("library.v1.Book")
    ListBooksResponse = lib("library.v1.ListBooksResponse")
    prefix = "/protogate.test.svc.TestService/"

    channel = grpc.insecure_channel(svc_addr)

    # Unary, with fields the gateway's schema (v1) lacks: they come back from the backend.
    thing = Thing(id=7, name="seven", price=1.5, secret_v2="hidden")
    thing.parts.add(id=1, label="a", note="v2 note")
    thing.more_parts_v2.add(id=2, label="b")
    got = unary(channel, prefix + "Echo", Thing)(thing, timeout=10)
    check("unary Echo round trip, v2 fields intact", got == thing, f"{got}")

    # A field no schema knows (number 99), raw bytes both ways: RawEcho answers the bytes it got.
    raw = Thing(id=1, name="raw").SerializeToString() + b"\x98\x06\x2a"
    echo_raw = channel.unary_unary(prefix + "RawEcho")
    got = echo_raw(raw, timeout=10)
    check("unknown field 99 survives both ways, byte for byte", got == raw, f"{got!r} != {raw!r}")

    # Metadata both ways: the backend answers with what it saw and its own header.
    call = unary(channel, prefix + "Metadata", Thing).with_call(
        Thing(), metadata=[("x-custom", "yes"), ("x-trace-bin", b"\x00\x01\x02")], timeout=10
    )
    got, rpc = call
    seen = set(got.counts.keys())
    check("request metadata reaches the backend", "x-custom=yes" in seen, f"{seen}")
    initial = dict(rpc.initial_metadata())
    check(
        "response metadata reaches the client",
        initial.get("x-served-by") == "backend-v2",
        f"{initial}",
    )

    # The deadline travels as grpc-timeout; a call past it fails DEADLINE_EXCEEDED.
    slow = unary(channel, prefix + "Slow", Thing)
    got = slow(SlowRequest(), timeout=5)
    check("grpc-timeout reaches the backend", got.name != "", f"{got}")
    request = SlowRequest()
    request.delay.seconds = 30
    try:
        slow(request, timeout=0.5)
        check("a call past its deadline fails", False, "it succeeded")
    except grpc.RpcError as e:
        check("a call past its deadline fails DEADLINE_EXCEEDED",
              e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"{e.code()} {e.details()}")

    # An error with details: code, message, grpc-status-details-bin, trailing metadata.
    try:
        unary(channel, prefix + "Fail", Thing)(
            FailRequest(code=5, message="no such thing", bad_field="thing.id"), timeout=10
        )
        check("Fail fails", False, "it succeeded")
    except grpc.RpcError as e:
        check("the upstream's code and message", e.code() == grpc.StatusCode.NOT_FOUND
              and e.details() == "no such thing", f"{e.code()} {e.details()}")
        trailing = dict(e.trailing_metadata())
        check("the upstream's metadata", trailing.get("x-failure-id") == "f-17", f"{trailing}")
        status = Status.FromString(trailing["grpc-status-details-bin"])
        check("status details", status.code == 5 and len(status.details) == 1, f"{status}")
        bad = BadRequest()
        status.details[0].Unpack(bad)
        check("a BadRequest detail naming the field",
              bad.field_violations[0].field == "thing.id", f"{bad}")

    # Server streaming.
    watch = channel.unary_stream(
        prefix + "Watch",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=Thing.FromString,
    )
    got = list(watch(thing, timeout=10))
    check("server stream: both messages, v2 fields intact", got == [thing, thing], f"{got}")

    # A method the gateway's schema lacks: UNIMPLEMENTED, as a gRPC server answers.
    try:
        channel.unary_unary("/protogate.test.svc.TestService/Nope")(b"", timeout=10)
        check("an unknown method fails", False, "it succeeded")
    except grpc.RpcError as e:
        check("an unknown method is UNIMPLEMENTED",
              e.code() == grpc.StatusCode.UNIMPLEMENTED, f"{e.code()} {e.details()}")

    channel.close()

    # Client and bidirectional streams, on the library service.
    channel = grpc.insecure_channel(lib_addr)
    imports = channel.stream_unary(
        "/library.v1.Library/ImportBooks",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=ListBooksResponse.FromString,
    )
    books = [Book(name=f"shelves/1/books/{i}", title=f"book {i}") for i in range(5)]
    got = imports(iter(books), timeout=10)
    check("client stream: every message arrives",
          got.next_page_token == "5" and list(got.books) == books, f"{got}")
    try:
        imports(iter([books[0], Book(title="fail")]), timeout=10)
        check("a refused import fails", False, "it succeeded")
    except grpc.RpcError as e:
        check("a client stream's error", e.code() == grpc.StatusCode.INVALID_ARGUMENT
              and "book 1" in e.details(), f"{e.code()} {e.details()}")

    chat = channel.stream_stream(
        "/library.v1.Library/Chat",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=Book.FromString,
    )
    got = [b.title for b in chat(iter(books), timeout=10)]
    check("bidirectional stream: each message answered in turn",
          got == [b.title.upper() for b in books], f"{got}")
    try:
        list(chat(iter([books[0], Book(title="fail")]), timeout=10))
        check("a failed chat fails", False, "it succeeded")
    except grpc.RpcError as e:
        check("a bidirectional stream's error",
              e.code() == grpc.StatusCode.ABORTED, f"{e.code()} {e.details()}")
    channel.close()
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
