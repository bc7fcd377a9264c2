//go:build tools

// Package tools pins promtool, the Prometheus rule checker and rule unit
// test runner that images/deploy/monitoring's test runs. It is its own
// module so the main module's `go ./...` never compiles it and Prometheus
// never enters the project's go.mod; scripts/promtool.sh builds it from here.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
