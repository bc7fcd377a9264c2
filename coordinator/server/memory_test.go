package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
)

// The server's tests run as the test coordinator does: with the in-memory
// driver registered (coordinator/server/memorydriver, which this package's
// tests cannot import).
func init() {
	RegisterDriver(DriverMemory, func(cfg Config) (compute.Driver, error) { return memory.Open(cfg.MemoryDir) })
}

// withoutMemoryDriver runs the rest of t as the production coordinator: no
// memory driver registered.
func withoutMemoryDriver(t *testing.T) {
	driversMu.Lock()
	f := drivers[DriverMemory]
	delete(drivers, DriverMemory)
	driversMu.Unlock()
	t.Cleanup(func() { RegisterDriver(DriverMemory, f) })
}

func TestDriverMemoryNamesTheMemoryDriver(t *testing.T) {
	require.Equal(t, memory.Name, DriverMemory)
}

// TestProductionBuildSelectsNoTestDriver: without the memory driver (the
// production coordinator), no driver named selects none — in a fresh data
// dir and in a memory dev dir alike — and nothing is recorded; naming a
// real driver works as before.
func TestProductionBuildSelectsNoTestDriver(t *testing.T) {
	withoutMemoryDriver(t)
	require.NotContains(t, Drivers(), DriverMemory)
	fresh := t.TempDir()
	_, err := selectDriver(fresh, "", false)
	require.ErrorIs(t, err, ErrNoDriver)
	require.ErrorContains(t, err, "pass --driver (kubernetes, local)")
	rec, err := readDriverFile(fresh)
	require.NoError(t, err)
	require.Empty(t, rec, "a refused selection records nothing")

	dev := t.TempDir()
	require.NoError(t, writeDriverFile(dev, "", DriverMemory))
	_, err = selectDriver(dev, "", false)
	require.ErrorIs(t, err, ErrNoDriver)
	require.ErrorContains(t, err, "-tags memorydriver")
	_, err = selectDriver(dev, DriverMemory, false)
	require.ErrorContains(t, err, "unknown driver")

	got, err := selectDriver(fresh, "local", false)
	require.NoError(t, err)
	require.Equal(t, "local", got)
}
