package logging

import (
	"testing"

	"oce.dev/oce/shared/netns"
)

// TestMain isolates the package's tests: one of them runs the real Codex.
func TestMain(m *testing.M) { netns.Main(m, netns.Options{PrivateTmp: true}) }
