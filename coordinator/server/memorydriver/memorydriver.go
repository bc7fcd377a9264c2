// Package memorydriver makes the in-memory test driver
// (coordinator/compute/memory) selectable in a coordinator that imports it:
// --driver memory, and the default of a dev data dir. The test coordinator
// imports it (cmd/coordinator built with -tags memorydriver: the cluster
// tests' processes share its records through --memory-dir); the production
// coordinator does not, so it links no test driver
// (internal/deptest checks it).
package memorydriver

import (
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/server"
)

func init() {
	server.RegisterDriver(server.DriverMemory, Factory)
}

// Factory builds the memory driver: its records live in the process, or in
// cfg.MemoryDir, shared by every member naming it.
func Factory(cfg server.Config) (compute.Driver, error) {
	return memory.Open(cfg.MemoryDir)
}
