#!/bin/sh
# Builds grpc-gateway 1.6.4 for the library test service, offline, from Debian's Go sources
# (GOPATH mode): target/grpcgw/bin/grpcgw. tests/tests/grpcgw_diff.rs runs it beside protogate.
# Debian packages (installed by .ci/run): golang-go protobuf-compiler libprotobuf-dev
#   golang-goprotobuf-dev protoc-gen-go-1-3 golang-google-grpc-dev golang-google-genproto-dev
#   golang-github-grpc-ecosystem-grpc-gateway-dev golang-grpc-gateway
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$ROOT/target/grpcgw"
GOOGLEAPIS=/usr/share/gocode/src/github.com/grpc-ecosystem/grpc-gateway/third_party/googleapis
PKG="$OUT/gopath/src/librarygw"
# The well-known types as golang/protobuf 1.3.5 and grpc-gateway 1.6.4 know them (the
# import paths in /usr/include's protos name the newer google.golang.org/protobuf types).
WKT=Mgoogle/protobuf/timestamp.proto=github.com/golang/protobuf/ptypes/timestamp
WKT=$WKT,Mgoogle/protobuf/duration.proto=github.com/golang/protobuf/ptypes/duration
WKT=$WKT,Mgoogle/protobuf/wrappers.proto=github.com/golang/protobuf/ptypes/wrappers
WKT=$WKT,Mgoogle/protobuf/field_mask.proto=google.golang.org/genproto/protobuf/field_mask
mkdir -p "$OUT/proto" "$OUT/bin" "$PKG/librarypb" "$PKG/grpcgw"

python3 "$ROOT/tests/grpcgw/strip.py" "$ROOT/proto/test/rest/v1/library.proto" > "$OUT/proto/library.proto.new"
cp "$ROOT/tests/grpcgw/main.go" "$PKG/grpcgw/main.go.new"
if [ -x "$OUT/bin/grpcgw" ] \
  && cmp -s "$OUT/proto/library.proto.new" "$OUT/proto/library.proto" \
  && cmp -s "$PKG/grpcgw/main.go.new" "$PKG/grpcgw/main.go"; then
  rm -f "$OUT/proto/library.proto.new" "$PKG/grpcgw/main.go.new"
  exit 0
fi
rm -f "$OUT/bin/grpcgw"
mv "$OUT/proto/library.proto.new" "$OUT/proto/library.proto"
mv "$PKG/grpcgw/main.go.new" "$PKG/grpcgw/main.go"
protoc -I "$OUT/proto" -I "$GOOGLEAPIS" -I /usr/include \
  --go_out=plugins=grpc,paths=source_relative,$WKT:"$PKG/librarypb" \
  --grpc-gateway_out=logtostderr=true,paths=source_relative,$WKT:"$PKG/librarypb" \
  "$OUT/proto/library.proto"
GO111MODULE=off GOPATH="$OUT/gopath:/usr/share/gocode" GOCACHE="$OUT/gocache" GOFLAGS= \
  go build -o "$OUT/bin/grpcgw" librarygw/grpcgw
echo "built $OUT/bin/grpcgw"
