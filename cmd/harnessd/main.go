// Command harnessd is the dedicated Codex Harness supervisor: see package harnessd.
package main

import (
	"context"
	"os"

	"oce.dev/oce/harnessd"
)

func main() { os.Exit(harnessd.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }
