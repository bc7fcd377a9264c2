package occ_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/occ"
)

// twoRevisions serves agent "bot" at revision 1, then changes its
// Configuration and plugins and serves revision 2.
func (h *harness) twoRevisions() string {
	h.t.Helper()
	h.defaultNS()
	_, id := h.servingAgent()
	h.ok("config", "update", "cfg", "-f", h.file("cfg2.json", strings.Replace(admission.ExampleEmbeddedAnthropic,
		`"maxConcurrent": 4`, `"maxConcurrent": 8`, 1)))
	h.ok("agent", "update", "bot", "--plugin", "web")
	h.ok("agent", "deploy", "bot", "--wait", "--timeout", "20s", "--log-level", "warn")
	return id
}

func (h *harness) revision(agentID string, n int64) state.Revision {
	h.t.Helper()
	for _, r := range h.b.M.Revisions(agentID) {
		if r.Number == n {
			return r
		}
	}
	h.t.Fatalf("no revision %d", n)
	return state.Revision{}
}

// rollback restores revision 1's inputs — its Configuration's document and
// the Agent's plugins — with audited writes, deploys them at revision 1's
// log level, and the new revision freezes revision 1's document exactly.
func TestRollbackDeploysEarlierInputs(t *testing.T) {
	h := newHarness(t)
	id := h.twoRevisions()
	require.Equal(t, wire.RevisionRetired, h.revision(id, 1).Status)
	seq := lastAuditSeq(h)

	r := h.run("agent", "rollback", "bot", "--wait", "--timeout", "20s", "-o", "json")
	require.Equal(t, 0, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "rollback of agent bot to the inputs of revision 1\n")
	require.Contains(t, r.stderr, "config/cfg configured (revision 1's document, generation 1)\n")
	require.Contains(t, r.stderr, "agent/bot configured (revision 1's inputs)\n")
	var rev wire.Revision
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rev))
	require.EqualValues(t, 3, rev.Number)
	require.Equal(t, wire.RevisionActive, rev.Status)

	one, three := h.revision(id, 1), h.revision(id, 3)
	require.JSONEq(t, string(one.Document), string(three.Document), "revision 1's document, its log level too")
	require.Empty(t, three.Plugins)
	require.EqualValues(t, 3, three.ConfigurationGeneration)

	var actions []string
	for _, au := range h.b.M.Audit(seq, 0) {
		if au.Actor == "bootstrap" {
			actions = append(actions, au.Action)
		}
	}
	require.Equal(t, []string{state.AuditConfigurationUpdate, state.AuditAgentUpdate, state.AuditDeploy, state.AuditActivate},
		actions, "each step is audited, as the caller; the activation too")

	// Rolling back again returns to revision 2's inputs (the newest before 3 that served).
	r = h.run("agent", "rollback", "bot", "--dry-run=server")
	require.Equal(t, 0, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "revision 2")
	require.Contains(t, r.stderr, "deploy not checked")
	require.EqualValues(t, 3, len(h.b.M.Revisions(id)), "a dry run deploys nothing")
}

func lastAuditSeq(h *harness) int64 {
	au := h.b.M.Audit(0, 0)
	if len(au) == 0 {
		return 0
	}
	return au[len(au)-1].Seq
}

// What rollback refuses changes nothing: no target, a Configuration other
// Agents use (which --config-copy restores for this Agent alone), bad
// flags.
func TestRollbackRefusals(t *testing.T) {
	h := newHarness(t)
	id := h.twoRevisions()
	h.ok("agent", "create", "other", "--config", "cfg", "--auth-method", "api_key", "--auth-kind", "secret",
		"--auth-ref", "secret://default/anthropic#key")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.b.WaitQuiescent(ctx))

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"shared configuration", nil, occ.ExitErr, "ROLLBACK_SHARED_CONFIGURATION"},
		{"no such revision", []string{"--to", "9"}, occ.ExitErr, "ROLLBACK_NO_TARGET"},
		{"the active one", []string{"--to", "2"}, occ.ExitErr, "ROLLBACK_NO_TARGET: revision 2 is the active one"},
		{"bad number", []string{"--to", "-1"}, occ.ExitUsage, "--to -1"},
		{"wait with dry run", []string{"--wait", "--dry-run=server"}, occ.ExitUsage, "exclude each other"},
		{"taken copy name", []string{"--config-copy", "cfg"}, occ.ExitErr, "ROLLBACK_UNSUPPORTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, a := h.writes()
			r := h.run(append([]string{"agent", "rollback", "bot"}, tc.args...)...)
			require.Equal(t, tc.code, r.code, "%s%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
			p2, a2 := h.writes()
			require.Equal(t, []int{p, a}, []int{p2, a2}, "nothing changed")
		})
	}
	require.Equal(t, occ.ExitErr, h.run("agent", "rollback", "other").code, "never deployed: no active revision")

	r := h.run("agent", "rollback", "bot", "--config-copy", "bot-rev1", "--wait", "--timeout", "20s")
	require.Equal(t, 0, r.code, "%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "config/bot-rev1 created (revision 1's document)\n")
	cfg := h.ok("config", "get", "cfg", "-o", "json")
	require.Contains(t, cfg, `"maxConcurrent": 8`, "the shared Configuration is unchanged")
	three := h.revision(id, 3)
	require.JSONEq(t, string(h.revision(id, 1).Document), string(three.Document))
	require.NotEqual(t, h.revision(id, 1).ConfigurationID, three.ConfigurationID)
}
