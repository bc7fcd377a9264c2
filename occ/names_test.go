package occ_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
)

// hexOrShortID matches an id as occ used to print it (whole or its first 12).
var hexOrShortID = regexp.MustCompile(`\b[0-9a-f]{12}(?:[0-9a-f]{20})?\b`)

// TestNamesNotIds: the human formats name Agents, Configurations,
// Namespaces and revisions (by number); the ids appear with -o wide, and
// -o json carries the names alongside them.
func TestNamesNotIds(t *testing.T) {
	h := deployed(t)
	var ag wire.Agent
	require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "agent", "get", "bot", "-o", "json")), &ag))
	require.Equal(t, "cfg", ag.Configuration)
	require.Equal(t, "team", ag.Namespace)
	require.Equal(t, int64(1), ag.ActiveRevision)
	require.NotEmpty(t, ag.ActiveRevisionID, "the ids stay")

	created := h.ok("-n", "team", "agent", "create", "other", "--config", "cfg", "--auth-method", "api_key",
		"--auth-kind", "secret", "--auth-ref", "secret://team/anthropic#key")
	require.Regexp(t, `other\s+embedded\s+cfg\s+-\s+0`, created, "create names the configuration")
	updated := h.ok("-n", "team", "agent", "update", "bot", "--plugin", "")
	require.Regexp(t, `bot\s+embedded\s+cfg\s+1\s+1`, updated, "update names the configuration and the active revision")

	stop := h.ok("-n", "team", "agent", "stop", "bot")
	require.Regexp(t, `^KIND\s+AGENT\s+REVISION\s+STATE`, stop)
	require.Regexp(t, `\nstop\s+bot\s+1\s+queued`, stop, "the work by kind and Agent")
	work := h.ok("-n", "team", "agent", "work", "bot")
	require.Regexp(t, `\nactivate\s+bot\s+1\s+completed`, work, "the revision by number")
	require.Regexp(t, `\nactivate\s+team/bot\s+1\s+completed`, h.ok("work", "--kind", "activate"), "every Namespace's work: namespace/agent")
	audit := h.ok("audit")
	for name, out := range map[string]string{"create": created, "update": updated, "stop": stop, "work": work,
		"audit": audit, "status": h.ok("status"), "agent list": h.ok("-n", "team", "agent", "list")} {
		require.NotRegexp(t, hexOrShortID, out, "%s prints no id without -o wide", name)
	}

	var ws []wire.Work
	require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "agent", "work", "bot", "-o", "json")), &ws))
	require.NotEmpty(t, ws)
	for _, w := range ws {
		require.Equal(t, "team", w.Namespace)
		require.Equal(t, "bot", w.Agent)
		require.NotEmpty(t, w.ID)
	}
	wideWork := h.ok("-n", "team", "agent", "work", "bot", "-o", "wide")
	require.Contains(t, wideWork, ws[0].ID, "-o wide adds the work's id")

	var recs []wire.AuditRecord
	require.NoError(t, json.Unmarshal([]byte(h.ok("audit", "--action", wire.AuditActivate, "-o", "json")), &recs))
	require.NotEmpty(t, recs)
	require.Equal(t, "bot", recs[0].Agent)
	require.Equal(t, "team", recs[0].Namespace)
	require.Equal(t, int64(1), recs[0].Revision)
	wideAudit := h.ok("audit", "--action", wire.AuditActivate, "-o", "wide")
	require.Regexp(t, `team\s+bot\s+1\n`, wideAudit, "-o wide names the Namespace, Agent and revision")
	require.NotRegexp(t, hexOrShortID, wideAudit)
}

// TestWaitNamesNotIds: agent stop|delete --wait and serviceprincipal list
// name the Agent and the revision (by number), never an id, without -o
// wide.
func TestWaitNamesNotIds(t *testing.T) {
	h := deployed(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go stopEngine(ctx, h.b, "")

	sps := h.ok("-n", "team", "serviceprincipal", "list")
	require.Regexp(t, `\nbot\s+bot\s+`, sps, "the Agent that owns the principal, by name")
	require.NotRegexp(t, hexOrShortID, sps)
	var list []wire.ServicePrincipal
	require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "serviceprincipal", "list", "-o", "json")), &list))
	require.Len(t, list, 1)
	require.Equal(t, "bot", list[0].Agent)
	require.NotEmpty(t, list[0].AgentID, "the id stays")
	require.Contains(t, h.ok("-n", "team", "serviceprincipal", "list", "-o", "wide"), list[0].AgentID, "-o wide adds it")

	for _, args := range [][]string{{"agent", "stop", "bot", "--wait"}, {"agent", "delete", "bot", "--wait"}} {
		r := h.run(append([]string{"-n", "team"}, args...)...)
		require.Equal(t, 0, r.code, "%v: %s%s", args, r.stdout, r.stderr)
		require.NotRegexp(t, hexOrShortID, r.stdout, "%v", args)
		require.NotRegexp(t, hexOrShortID, r.stderr, "%v", args)
	}
}
