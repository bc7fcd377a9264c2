package nodehost

import (
	"testing"

	"oce.dev/oce/shared/netns"
)

// Real OpenClaw gateways run in a loopback-only namespace with a private /tmp.
func TestMain(m *testing.M) { netns.Main(m, netns.Options{PrivateTmp: true}) }
