package engine

import (
	"context"
	"log/slog"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// StandbyPace is the least time between two of a follower's KeepWarm
// passes: in a deploy storm the state changes many times a second, and a
// follower's cache started a few seconds later costs nothing.
const StandbyPace = 2 * time.Second

// StandbyConfig configures RunStandby.
type StandbyConfig struct {
	// ComputeID is the compute target whose revisions the driver runs;
	// empty means the driver's Capabilities().Name (as Config.ComputeID).
	ComputeID string
	// Following reports whether this replica follows now; the leader's
	// engine warms its own driver (Engine.warmUp) and observes through it.
	Following func() bool
	// Pace is the least time between two passes; default StandbyPace.
	Pace time.Duration
	// Clock defaults to RealClock.
	Clock Clock
	// Log defaults to discarding.
	Log *slog.Logger
}

// RunStandby keeps a follower's driver (compute.Standby) warm with every
// active revision of its compute target until ctx ends: after each state
// change (paced), it hands the driver the active revisions, so a leader
// change finds synced caches and the new leader's first round reads
// nothing through the API server. A driver that is not a Standby returns
// at once.
func RunStandby(ctx context.Context, m *state.Machine, d compute.Driver, cfg StandbyConfig) {
	s, ok := d.(compute.Standby)
	if !ok {
		return
	}
	if cfg.ComputeID == "" {
		cfg.ComputeID = d.Capabilities().Name
	}
	if cfg.Pace <= 0 {
		cfg.Pace = StandbyPace
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	kept, ever := uint64(0), false
	for {
		changed := m.Changed()
		if applied := m.Applied(); (!ever || applied != kept) && cfg.Following() {
			kept, ever = applied, true
			keepWarm(ctx, m, s, cfg)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		select {
		case <-ctx.Done():
			return
		case <-cfg.Clock.After(cfg.Pace):
		}
	}
}

// keepWarm is one standby pass, bounded by WarmUpTimeout: caches still
// syncing then go on syncing, and the next pass waits for them again.
func keepWarm(ctx context.Context, m *state.Machine, s compute.Standby, cfg StandbyConfig) {
	revs := activeRevisionsOf(m, cfg.ComputeID)
	wctx, cancel := context.WithTimeout(ctx, WarmUpTimeout)
	defer cancel()
	start := time.Now()
	if !s.KeepWarm(wctx, revs) {
		if ctx.Err() == nil {
			cfg.Log.Warn("standby caches not warm yet", "revisions", len(revs))
		}
		return
	}
	cfg.Log.Debug("standby caches warm", "revisions", len(revs), "ms", time.Since(start).Milliseconds())
}

// activeRevisionsOf is every active revision (of an Agent not being
// deleted) that runs on computeID.
func activeRevisionsOf(m *state.Machine, computeID string) []state.Revision {
	active := m.ActiveRevisions()
	revs := make([]state.Revision, 0, len(active))
	for _, id := range active {
		if rev, ok := m.Revision(id); ok && (rev.ComputeID == "" || rev.ComputeID == computeID) {
			revs = append(revs, rev)
		}
	}
	return revs
}
