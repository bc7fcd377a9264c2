package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/store"
)

// DriverFactory builds a compute driver from the server's configuration.
type DriverFactory func(cfg Config) (compute.Driver, error)

var (
	driversMu sync.Mutex
	drivers   = map[string]DriverFactory{
		"memory": func(Config) (compute.Driver, error) { return memory.New(memory.DefaultCapabilities()), nil },
	}
)

// RegisterDriver makes a compute driver selectable by --driver name.
func RegisterDriver(name string, f DriverFactory) {
	driversMu.Lock()
	defer driversMu.Unlock()
	drivers[name] = f
}

// newDriver builds the selected compute driver.
func newDriver(cfg Config) (compute.Driver, error) {
	driversMu.Lock()
	f, ok := drivers[cfg.Driver]
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	driversMu.Unlock()
	if !ok {
		sort.Strings(names)
		return nil, fmt.Errorf("server: unknown driver %q (have: %s)", cfg.Driver, strings.Join(names, ", "))
	}
	return f(cfg)
}

// runEngine runs the activation engine for one term of leadership; the
// store cancels ctx when leadership is lost.
func runEngine(ctx context.Context, cfg Config, st *store.Store, driver compute.Driver, log *slog.Logger) {
	ecfg := cfg.Engine
	ecfg.Owner = st.NodeID()
	for {
		e := engine.New(ecfg, st, driver, nil, log)
		log.Info("activation engine started", "term", st.Stats().Term)
		err := e.Run(ctx)
		if ctx.Err() != nil || err == nil || errors.Is(err, context.Canceled) {
			log.Info("activation engine stopped")
			return
		}
		// Still the leader: an engine must run, so start a fresh one.
		log.Error("activation engine failed; restarting", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(engineRestartDelay):
		}
	}
}

// engineRestartDelay paces restarts of an engine that failed while this
// node stayed the leader.
const engineRestartDelay = time.Second
