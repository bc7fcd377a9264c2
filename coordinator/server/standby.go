package server

import (
	"context"
	"fmt"
	"strconv"

	"oce.dev/oce/coordinator/engine"
)

// Whether followers keep their driver warm: the flag wins over the
// variable (docs/OPERATIONS.md).
const (
	flagColdStandby = "--cold-standby"
	envColdStandby  = "OCE_COLD_STANDBY"
)

// coldStandby reads whether followers keep no driver caches: --cold-standby
// as given, else OCE_COLD_STANDBY, else false. A value that is not a
// boolean is refused naming the flag or variable it came from, so a typo
// does not silently leave every follower warm (or cold).
func coldStandby(flagValue string, getenv func(string) string) (bool, error) {
	v, from := setting(flagValue, flagColdStandby, getenv, envColdStandby)
	if v == "" {
		return false, nil
	}
	cold, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not true or false", ErrDriverConfig, from, v)
	}
	return cold, nil
}

// startStandby keeps the driver's caches warm while this node follows
// (engine.RunStandby), unless a cold standby.
func (n *node) startStandby(context.Context) error {
	if n.coldStandby {
		n.log.Info("cold standby: no driver caches while following")
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		engine.RunStandby(ctx, n.st.Machine(), n.driver, engine.StandbyConfig{ComputeID: n.cfg.Engine.ComputeID,
			Following: func() bool { return !n.st.IsLeader() }, Log: n.log.With("component", "standby")})
	}()
	n.standby = func() { cancel(); <-done }
	return nil
}
