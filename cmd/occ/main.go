// Command occ is the admin CLI of the oce coordinator; see package occ.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"oce.dev/oce/occ"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := occ.Main(ctx, os.Args[1:], occ.Options{})
	stop()
	os.Exit(code)
}
