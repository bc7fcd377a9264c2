// Command nodehost is an OpenClaw node: see package nodehost.
package main

import (
	"context"
	"os"

	"oce.dev/oce/nodehost"
)

func main() { os.Exit(nodehost.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }
