//go:build memorydriver

package main

// The test coordinator (go build -tags memorydriver): the in-memory test
// driver is selectable. The production build links no test driver.
import _ "oce.dev/oce/coordinator/server/memorydriver"
