// Command gen regenerates the embedded OpenClaw configuration schema and
// sensitive paths from the installed pinned runtime (make runtimes):
// go generate ./coordinator/admission/openclawschema.
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
	exitOn(err)
	for name, gen := range map[string]func(context.Context, runtimes.Paths) ([]byte, error){
		openclawschema.FileName:          openclawschema.Generate,
		openclawschema.SensitiveFileName: openclawschema.GenerateSensitive,
	} {
		b, err := gen(context.Background(), p)
		exitOn(err)
		exitOn(os.WriteFile(name, b, 0o644))
	}
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
