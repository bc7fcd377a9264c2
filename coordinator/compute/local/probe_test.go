package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/proc"
)

// newProbeFixture is a driver with the before-cutover activation order; its
// fake probes pass once gate exists.
func newProbeFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	gate := filepath.Join(t.TempDir(), "gate")
	f.d.cfg.ProbeBeforeCutover = true
	f.d.cfg.Env = append(f.d.cfg.Env, envProbeGate+"="+gate)
	return f, gate
}

// TestReplacementProbesBeforeCutover: a staged embedded replacement runs its
// model probe while the predecessor serves — not ready, in the model-probe
// phase, until it passed — and its gateway starts at cutover vouched, so it
// does not probe again.
func TestReplacementProbesBeforeCutover(t *testing.T) {
	f, gate := newProbeFixture(t)
	ctx := t.Context()
	r1, r2 := embeddedRev("rev1", "good"), embeddedRev("rev2", "good")
	require.NoError(t, os.WriteFile(gate, nil, 0o600)) // the first revision's gateway probes itself
	require.NoError(t, f.d.PrepareRevision(ctx, r1))
	f.waitReady(t, r1)
	require.NoError(t, f.d.ActivateRevision(ctx, r1))
	old := f.procsOf(t, "rev1")
	require.NoError(t, os.Remove(gate))

	require.NoError(t, f.d.PrepareRevision(ctx, r2))
	require.NoError(t, f.d.PrepareRevision(ctx, r2), "prepare is idempotent")
	poll.Until(t, func() bool {
		obs, err := f.d.ObserveRevision(ctx, r2)
		require.NoError(t, err)
		require.False(t, obs.Ready, "not ready before its probe passed")
		return obs.Phase == "model-probe"
	}, 20*time.Second, 20*time.Millisecond, "the observation names the running phase")
	obs, err := f.d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.Equal(t, ReasonProbing, obs.Reason)
	require.Nil(t, f.d.revs["rev2"].Gateway, "no gateway beside the serving one")
	require.Equal(t, "gateway rev1", dialRoute(t, f.data, "agent1"), "the predecessor keeps serving")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	poll.Until(t, func() bool {
		obs, err := f.d.ObserveRevision(ctx, r2)
		require.NoError(t, err)
		return obs.Ready && obs.Reason == ReasonStaged
	}, 20*time.Second, 20*time.Millisecond)
	require.Positive(t, f.d.revs["rev2"].ProbePassedAtMs)
	probe := append([]*proc.Process{f.d.revs["rev2"].Probe}, proc.Descendants(f.d.revs["rev2"].Probe.PID)...)

	require.NoError(t, f.d.ActivateRevision(ctx, r2))
	require.False(t, proc.AnyAlive(old), "the serving gateway stopped at cutover")
	require.False(t, proc.AnyAlive(probe), "the probe stopped before the gateway started")
	f.waitReady(t, r2)
	require.Equal(t, "gateway rev2", dialRoute(t, f.data, "agent1"))
	ev := strings.Join(f.eventLines(t), "\n")
	require.Contains(t, ev, "probe rev2 passed")
	require.Contains(t, ev, "gateway rev2 vouched", "the gateway starts with the time its probe passed")
	require.NotContains(t, ev, "gateway rev1 vouched", "a first gateway probes at its start")
}

// TestReplacementHeldBeforeCutover: a replacement whose probe fails is held
// with the code before any cutover; the predecessor keeps serving, and
// stopping the candidate leaves nothing of it running.
func TestReplacementHeldBeforeCutover(t *testing.T) {
	f, gate := newProbeFixture(t)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	ctx := t.Context()
	r1, r2 := embeddedRev("rev1", "good"), embeddedRev("rev2", "bad")
	require.NoError(t, f.d.PrepareRevision(ctx, r1))
	f.waitReady(t, r1)
	require.NoError(t, f.d.ActivateRevision(ctx, r1))
	serving := f.procsOf(t, "rev1")

	require.NoError(t, f.d.PrepareRevision(ctx, r2))
	var obs compute.Observation
	poll.Until(t, func() bool {
		var err error
		obs, err = f.d.ObserveRevision(ctx, r2)
		require.NoError(t, err)
		return obs.HeldCode != ""
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, codes.Code("AUTHENTICATION_FAILED"), obs.HeldCode)
	require.Equal(t, "model-probe", obs.Phase, "the held check")
	probe := append([]*proc.Process{f.d.revs["rev2"].Probe}, proc.Descendants(f.d.revs["rev2"].Probe.PID)...)

	res, err := f.d.StopRevision(ctx, r2)
	require.NoError(t, err)
	require.True(t, res.Stopped)
	require.False(t, proc.AnyAlive(probe), "the failed candidate's probe is gone")
	require.True(t, proc.AnyAlive(serving), "the predecessor was never stopped")
	require.Equal(t, "gateway rev1", dialRoute(t, f.data, "agent1"))
}

// TestSeedOrderStagesWithoutProbe: with the seeds' order a staged
// replacement is ready at once and probes only at its start.
func TestSeedOrderStagesWithoutProbe(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	r1, r2 := embeddedRev("rev1", "good"), embeddedRev("rev2", "good")
	require.NoError(t, f.d.PrepareRevision(ctx, r1))
	f.waitReady(t, r1)
	require.NoError(t, f.d.ActivateRevision(ctx, r1))
	require.NoError(t, f.d.PrepareRevision(ctx, r2))
	obs, err := f.d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.Equal(t, compute.Observation{Ready: true, Reason: ReasonStaged, Staged: true}, obs)
	require.Nil(t, f.d.revs["rev2"].Probe)
	require.NoError(t, f.d.ActivateRevision(ctx, r2))
	f.waitReady(t, r2)
	require.NotContains(t, strings.Join(f.eventLines(t), "\n"), "vouched")
}
