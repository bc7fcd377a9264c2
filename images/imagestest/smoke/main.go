// Command smoke runs the smoke checks of freshly built images (see
// imagestest.Smoke): `go run ./images/imagestest/smoke NAME=ARCHIVE...`.
// scripts/images.sh runs it after every build, as root (runc), inside a
// loopback-only network namespace with a private /tmp. It exits 1 naming
// every check that failed and what the image lacks.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"oce.dev/oce/images/imagestest"
	"oce.dev/oce/shared/netns"
)

func main() {
	netns.Main(netns.RunnerFunc(run), netns.Options{PrivateTmp: true})
}

func run() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: smoke NAME=ARCHIVE...")
		return 2
	}
	dir, err := os.MkdirTemp("", "oce-smoke-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "smoke:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	failed := 0
	for _, arg := range os.Args[1:] {
		name, archive, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "smoke: %q is not NAME=ARCHIVE\n", arg)
			return 2
		}
		start := time.Now()
		u, err := imagestest.Unpack(archive)
		if err == nil {
			img := imagestest.Image{Name: name, Ref: u.Name, Archive: archive}
			err = imagestest.Smoke(context.Background(), img, u, dir+"/"+name)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "smoke: %v\n", err)
			failed++
			continue
		}
		fmt.Fprintf(os.Stderr, "smoke: %s passed %d checks in %s\n", name, len(imagestest.SmokeChecks(name)), time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		return 1
	}
	return 0
}
