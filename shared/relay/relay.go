// Package relay forwards byte streams between listeners and dialers: the
// local compute driver's stable Agent endpoint (a Unix socket forwarded to
// the active revision's loopback gateway port), and the host-side bridge
// `occ dev up` puts in front of a coordinator that runs inside its own
// network namespace (a loopback port forwarded to the API's Unix socket).
package relay

import (
	"errors"
	"io"
	"net"
)

// Serve accepts connections on ln until it is closed and pipes each to a
// fresh connection from dial; a failed dial drops that one connection.
// It returns nil once ln is closed.
func Serve(ln net.Listener, dial func() (net.Conn, error)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			up, err := dial()
			if err != nil {
				return
			}
			defer up.Close()
			Pipe(c, up)
		}()
	}
}

// Pipe copies both ways between a and b until either side ends.
func Pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
}
