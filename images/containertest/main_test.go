// Package containertest runs oce's images as containers with runc, each
// configured from the Pod the Kubernetes driver renders (user, read-only
// root, volumes in kubelet's layout, dropped capabilities, the driver's
// environment and exec probes), inside the test binary's loopback-only
// network namespace, against the offline fake provider.
package containertest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"oce.dev/oce/images/imagestest"
	"oce.dev/oce/shared/netns"
)

var (
	images   map[string]imagestest.Image
	unpacked = map[string]*imagestest.Unpacked{} // by image ref
)

type setup struct{ m *testing.M }

func (s setup) Run() int {
	var err error
	if images, err = imagestest.Load(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	for _, img := range images {
		u, err := imagestest.Unpack(img.Archive)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		unpacked[img.Ref] = u
	}
	fmt.Fprintf(os.Stderr, "containertest: images unpacked in %s\n", time.Since(start).Round(time.Millisecond))
	return s.m.Run()
}

// TestMain builds the images (once, keyed by inputs; it may use apt and npm)
// before isolating the tests in a loopback-only namespace.
func TestMain(m *testing.M) {
	if !netns.Reexecuted() {
		start := time.Now()
		if _, err := imagestest.Build(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "containertest: images ready in %s\n", time.Since(start).Round(time.Millisecond))
	}
	netns.Main(setup{m}, netns.Options{PrivateTmp: true})
}
