package ocproto

import (
	"testing"

	"oce.dev/oce/shared/netns"
)

// The real gateway writes fixed /tmp paths and must not reach the network.
func TestMain(m *testing.M) { netns.Main(m, netns.Options{PrivateTmp: true}) }
