// grpc-gateway 1.6.4 (Debian's golang-github-grpc-ecosystem-grpc-gateway-dev) in front of the
// library test service, for tests/tests/grpcgw_diff.rs. Routes come from the same
// google.api.http rules protogate reads (tests/grpcgw/strip.py). JSON is jsonpb set to the
// canonical mapping (OrigName=false: lowerCamelCase names), as grpc-gateway users configure it.
// Prints "listening on ADDR" once it accepts connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"

	pb "librarygw/librarypb"

	"github.com/grpc-ecosystem/grpc-gateway/runtime"
	"google.golang.org/grpc"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "HTTP listen address")
	upstream := flag.String("upstream", "127.0.0.1:50051", "gRPC backend address (h2c)")
	flag.Parse()

	ctx := context.Background()
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{OrigName: false, EmitDefaults: false}),
	)
	opts := []grpc.DialOption{grpc.WithInsecure()}
	if err := pb.RegisterLibraryHandlerFromEndpoint(ctx, mux, *upstream, opts); err != nil {
		log.Fatalf("register: %v", err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	fmt.Printf("listening on %s\n", l.Addr())
	log.Fatal(http.Serve(l, mux))
}
