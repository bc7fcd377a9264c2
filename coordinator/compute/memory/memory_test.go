package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

func TestDriverLifecycleAndLog(t *testing.T) {
	ctx := context.Background()
	d := New(DefaultCapabilities())
	r1 := state.Revision{ID: "r1", AgentID: "a1"}
	r2 := state.Revision{ID: "r2", AgentID: "a1"}
	require.NoError(t, d.PrepareRevision(ctx, r1))
	obs, err := d.ObserveRevision(ctx, r1)
	require.NoError(t, err)
	require.True(t, obs.Ready)
	require.NoError(t, d.ActivateRevision(ctx, r1))
	require.Equal(t, "r1", d.Route("a1"))
	res, err := d.StopRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true, Found: true}, res)
	res, err = d.StopRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true}, res, "stopping a stopped runtime is idempotent")
	d.ComeBack("r1")
	res, err = d.StopRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true, Found: true, CameBack: true}, res)
	require.NoError(t, d.RetireRevision(ctx, r1))
	require.Empty(t, d.Route("a1"))
	require.True(t, d.Runtime("r1").Retired)
	obs, err = d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.False(t, obs.Ready, "an unprepared revision is not ready")
	require.Equal(t, []Call{{OpPrepare, "r1"}, {OpObserve, "r1"}, {OpActivate, "r1"}, {OpStop, "r1"}, {OpStop, "r1"},
		{OpStop, "r1"}, {OpRetire, "r1"}, {OpObserve, "r2"}}, d.Calls())
}

func TestDriverFaults(t *testing.T) {
	ctx := context.Background()
	d := New(DefaultCapabilities())
	r1 := state.Revision{ID: "r1", AgentID: "a1"}
	boom := errors.New("boom")
	d.Fail(OpPrepare, "r1", 2, boom)
	require.ErrorIs(t, d.PrepareRevision(ctx, r1), boom)
	require.ErrorIs(t, d.PrepareRevision(ctx, r1), boom)
	require.NoError(t, d.PrepareRevision(ctx, r1))
	d.Fail(OpActivate, "", -1, nil)
	for range 3 {
		require.ErrorIs(t, d.ActivateRevision(ctx, r1), ErrInjected)
	}
	d.Fail(OpActivate, "", 0, nil)
	require.NoError(t, d.ActivateRevision(ctx, r1))

	d.ReadyAfter("r1", 2)
	for _, want := range []bool{false, false, true} {
		obs, err := d.ObserveRevision(ctx, r1)
		require.NoError(t, err)
		require.Equal(t, want, obs.Ready)
	}
	cause := &codes.Cause{Kind: codes.CauseProcessExit, Detail: "exit-1"}
	d.Hold("r1", codes.ModelProbeFailed, cause)
	obs, err := d.ObserveRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, compute.Observation{Reason: "held", HeldCode: codes.ModelProbeFailed, Cause: cause}, obs)

	release := make(chan struct{})
	d.SetHook(OpRetire, func(ctx context.Context, id string) error {
		<-release
		return nil
	})
	done := make(chan error)
	go func() { done <- d.RetireRevision(ctx, r1) }()
	select {
	case <-done:
		t.Fatal("hook did not block")
	default:
	}
	close(release)
	require.NoError(t, <-done)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, d.PrepareRevision(cctx, r1), context.Canceled)
}

func TestCapabilities(t *testing.T) {
	c := DefaultCapabilities()
	require.True(t, c.SupportsTopology(state.HarnessCodex, state.ModeDedicated))
	require.False(t, c.SupportsTopology(state.HarnessCodex, state.ModeEmbedded))
	require.True(t, c.SupportsHarnessAuth(state.HarnessOpenClaw, state.ModeEmbedded, "api_key"))
	require.False(t, c.SupportsHarnessAuth(state.HarnessOpenClaw, state.ModeEmbedded, "codex_pat"))
	require.True(t, c.SupportsHarnessAuth(state.HarnessCodex, state.ModeDedicated, "chatgpt_service_account"))
	require.True(t, c.RequiresStoppedPredecessors(state.ModeDedicated))
	require.False(t, c.RequiresStoppedPredecessors(state.ModeEmbedded))
	code, perm := compute.ErrorCode(compute.Permanent(codes.ForeignWorkload, errors.New("x")), codes.TransientDependency)
	require.Equal(t, codes.ForeignWorkload, code)
	require.True(t, perm)
	code, perm = compute.ErrorCode(errors.New("x"), codes.TransientDependency)
	require.Equal(t, codes.TransientDependency, code)
	require.False(t, perm)
}

// TestSharedDriver: two drivers over one directory (two coordinator
// processes of a test) see the same runtimes and routes, so a new leader
// observes what its predecessor started; their call logs stay their own.
func TestSharedDriver(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := NewShared(DefaultCapabilities(), dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, old.Close()) })
	r1 := state.Revision{ID: "r1", AgentID: "a1"}
	r2 := state.Revision{ID: "../r2", AgentID: "a/1"} // ids are never paths
	require.NoError(t, old.PrepareRevision(ctx, r1))
	require.NoError(t, old.ActivateRevision(ctx, r1))

	next, err := NewShared(DefaultCapabilities(), dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, next.Close()) })
	obs, err := next.ObserveRevision(ctx, r1)
	require.NoError(t, err)
	require.True(t, obs.Ready, "the runtime the other process started is observed ready")
	require.Equal(t, "r1", next.Route("a1"))
	require.NoError(t, next.PrepareRevision(ctx, r2))
	require.NoError(t, next.ActivateRevision(ctx, r2))
	require.Equal(t, "../r2", old.Route("a/1"))
	res, err := next.StopRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true, Found: true}, res)
	old.ComeBack("r1")
	res, err = next.StopRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true, Found: true, CameBack: true}, res, "a come-back through the other process is seen")
	require.NoError(t, old.RetireRevision(ctx, r1))
	require.Empty(t, next.Route("a1"))
	require.Equal(t, Runtime{Prepared: true, Stops: 2, Retired: true}, next.Runtime("r1"))
	require.Equal(t, []Call{{OpPrepare, "r1"}, {OpActivate, "r1"}, {OpRetire, "r1"}}, old.Calls())
	entries, err := os.ReadDir(filepath.Join(dir, "runtimes"))
	require.NoError(t, err)
	require.Len(t, entries, 2, "one record file per revision, no temporary left")
}
