// Package loopback gives tests a connected pair of TCP connections on
// 127.0.0.1, for exercising connection wrappers against a real socket.
package loopback

import (
	"context"
	"net"
	"testing"
)

// Pair dials a fresh loopback listener with dial and returns the dialed
// connection and the accepted one; both are closed when the test ends.
func Pair(t testing.TB, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("loopback listener accepted nothing")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
