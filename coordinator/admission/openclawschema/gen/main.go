// Command gen regenerates the embedded OpenClaw configuration schema from
// the installed pinned runtime (make runtimes): go generate ./coordinator/admission/openclawschema.
package main

import (
	"context"
	"fmt"
	"os"

	"oce.dev/oce/coordinator/admission/openclawschema"
	"oce.dev/oce/shared/runtimes"
)

func main() {
	p, err := runtimes.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	b, err := openclawschema.Generate(context.Background(), p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(openclawschema.FileName, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
