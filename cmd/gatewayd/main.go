// Command gatewayd is the Gateway container's entrypoint: see package gatewayd.
package main

import (
	"context"
	"os"

	"oce.dev/oce/gatewayd"
)

func main() { os.Exit(gatewayd.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }
