package occ_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/occ"
)

// stopEngine drives queued stop and delete work like the activation
// engine would, failing it with failCode when set.
func stopEngine(ctx context.Context, b *apitest.Backend, failCode string) {
	m := b.Machine()
	for {
		ch := m.Changed()
		for _, w := range m.WorkItems(state.WorkFilter{State: state.WorkQueued}) {
			if w.Kind != state.WorkStop && w.Kind != state.WorkDelete {
				continue
			}
			ref := state.ClaimRef{WorkID: w.ID, Owner: "engine"}
			if _, err := b.Apply(state.CmdClaimWork, state.ClaimWork{WorkID: w.ID, Owner: "engine", LeaseExpiry: time.Now().Add(time.Hour)}); err != nil {
				continue
			}
			_, _ = b.Apply(state.CmdSetWorkPhase, state.SetWorkPhase{ClaimRef: ref, Phase: state.PhaseStopping})
			switch {
			case failCode != "":
				_, _ = b.Apply(state.CmdFailWork, state.FailWork{ClaimRef: ref, Code: failCode, Detail: "driver refused"})
			case w.Kind == state.WorkStop:
				a, _ := m.Agent(w.AgentID)
				_, _ = b.Apply(state.CmdCompleteStop, state.CompleteStop{ClaimRef: ref, Expected: a.ActiveRevisionID})
			default:
				_, _ = b.Apply(state.CmdCompleteDeletion, state.CompleteDeletion{ClaimRef: ref})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// TestStopAndDeleteWait: agent stop|delete --wait follow the work in words
// until the Agent has no active revision or is gone, with deploy --wait's
// exit codes: 3 when the work fails, 4 on timeout, 130 on Ctrl-C, 2 for a
// bad --timeout.
func TestStopAndDeleteWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		engine    bool
		failCode  string
		interrupt bool
		code      int
		stdout    []string
		stderr    []string
		// after checks the coordinator's state once the command ended.
		after func(t *testing.T, h *harness)
	}{
		{name: "stop", args: []string{"agent", "stop", "bot", "--wait"}, engine: true, code: occ.ExitOK,
			stdout: []string{"stop", "completed"},
			stderr: []string{"stop of agent bot requested", "stopped: agent bot has no active revision (state stopped)"},
			after: func(t *testing.T, h *harness) {
				var ag struct{ ActiveRevisionID string }
				require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "agent", "get", "bot", "-o", "json")), &ag))
				require.Empty(t, ag.ActiveRevisionID)
			}},
		{name: "stop -o json", args: []string{"agent", "stop", "bot", "--wait", "-o", "json"}, engine: true, code: occ.ExitOK,
			stdout: []string{`"state": "completed"`, `"kind": "stop"`}},
		{name: "delete", args: []string{"agent", "delete", "bot", "--wait"}, engine: true, code: occ.ExitOK,
			stdout: []string{"agent/bot deleted"},
			stderr: []string{"delete of agent bot requested", "deleted: agent bot is gone"},
			after: func(t *testing.T, h *harness) {
				r := h.run("-n", "team", "agent", "get", "bot")
				require.Equal(t, occ.ExitErr, r.code)
				require.Contains(t, r.stderr, "NOT_FOUND")
			}},
		{name: "stop fails", args: []string{"agent", "stop", "bot", "--wait"}, engine: true, failCode: "DRIVER_ERROR",
			code: occ.ExitFailed, stderr: []string{"stop failed after attempt 1 of", "the last attempt ended DRIVER_ERROR (driver refused)",
				"the stop of agent bot failed: DRIVER_ERROR"}},
		{name: "delete fails", args: []string{"agent", "delete", "bot", "--wait"}, engine: true, failCode: "DRIVER_ERROR",
			code: occ.ExitFailed, stderr: []string{"the delete of agent bot failed: DRIVER_ERROR"}},
		{name: "stop times out", args: []string{"agent", "stop", "bot", "--wait", "--timeout", "50ms"}, code: occ.ExitTimeout,
			stderr: []string{"stop queued: waiting for the activation engine to pick it up", "timed out waiting for the stop of agent bot",
				"continues on the server", "follow it with: occ -n team agent work bot; occ -n team agent get bot"}},
		{name: "delete times out", args: []string{"agent", "delete", "bot", "--wait", "--timeout", "50ms"}, code: occ.ExitTimeout,
			stderr: []string{"delete queued", "timed out waiting for the delete of agent bot"},
			after: func(t *testing.T, h *harness) {
				require.Contains(t, h.ok("-n", "team", "agent", "list"), "(deleting)", "the deletion goes on")
			}},
		{name: "stop interrupted", args: []string{"agent", "stop", "bot", "--wait"}, interrupt: true, code: occ.ExitInterrupted,
			stderr: []string{"interrupted: the stop of agent bot continues on the server", "occ -n team agent work bot"}},
		{name: "bad timeout", args: []string{"agent", "delete", "bot", "--wait", "--timeout", "0s"}, code: occ.ExitUsage,
			stderr: []string{"--timeout"},
			after: func(t *testing.T, h *harness) {
				require.NotContains(t, h.ok("-n", "team", "agent", "list"), "(deleting)", "a usage error changes nothing")
			}},
		{name: "without --wait", args: []string{"agent", "stop", "bot"}, code: occ.ExitOK, stdout: []string{"queued"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := deployed(t)
			if tc.engine {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				go stopEngine(ctx, h.b, tc.failCode)
			}
			args := append([]string{"-n", "team"}, tc.args...)
			var r result
			if tc.interrupt {
				r = h.runInterrupted("queued", args...)
			} else {
				r = h.run(args...)
			}
			require.Equal(t, tc.code, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
			for _, w := range tc.stdout {
				require.Contains(t, r.stdout, w)
			}
			for _, w := range tc.stderr {
				require.Contains(t, r.stderr, w)
			}
			if tc.after != nil {
				tc.after(t, h)
			}
		})
	}
}

// runInterrupted runs occ and cancels its context (what cmd/occ does on
// SIGINT) once stderr shows mark.
func (h *harness) runInterrupted(mark string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	go func() {
		for !strings.Contains(safeString(&errb), mark) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
		cancel()
	}()
	code := occ.Main(ctx, args, occ.Options{
		Stdout: &out, Stderr: &syncWriter{b: &errb}, Getenv: func(k string) string { return h.env[k] },
		ConfigFile: filepath.Join(h.dir, "occ.yaml"), WorkDir: h.dir, PollInterval: 5 * time.Millisecond})
	return result{code: code, stdout: out.String(), stderr: safeString(&errb)}
}
