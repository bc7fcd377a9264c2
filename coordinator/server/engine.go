package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/store"
)

// runEngine runs the activation engine for one term of leadership; the
// store cancels ctx when leadership is lost. cur holds the running engine
// (nil while none runs), for the quiescence the cluster report carries.
func runEngine(ctx context.Context, cfg Config, st *store.Store, driver compute.Driver, log *slog.Logger,
	cur *atomic.Pointer[engine.Engine]) {
	defer cur.Store(nil)
	ecfg := cfg.Engine
	ecfg.Owner = st.NodeID()
	if ra := reauthorizer(cfg, st.Machine(), driver); ra != nil {
		ecfg.Reauthorizer = ra
	}
	for {
		e := engine.New(ecfg, st, driver, nil, log)
		cur.Store(e)
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
