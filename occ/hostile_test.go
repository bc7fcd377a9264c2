package occ_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// TestTokenOutFile: --out creates the token file 0600, fixes a loose
// existing file's mode, and refuses a symbolic link without writing
// through it.
func TestTokenOutFile(t *testing.T) {
	h := newHarness(t)
	_, err := h.b.Apply(state.CmdCreateUser, state.CreateUser{ID: "u1", Name: "alice"})
	require.NoError(t, err)
	out := filepath.Join(h.dir, "alice.token")
	require.NoError(t, os.WriteFile(out, []byte("stale"), 0o644))
	require.NoError(t, os.Chmod(out, 0o644))
	require.Contains(t, h.ok("token", "create", "--user", "alice", "--out", out), "written to")
	st, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Regexp(t, `^oce_[0-9a-f]{32}_\S{43}\n$`, string(b))

	target := filepath.Join(h.dir, "public.txt")
	require.NoError(t, os.WriteFile(target, nil, 0o644))
	link := filepath.Join(h.dir, "link.token")
	require.NoError(t, os.Symlink(target, link))
	r := h.run("token", "create", "--user", "alice", "--out", link)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "symbolic link")
	b, err = os.ReadFile(target)
	require.NoError(t, err)
	require.Empty(t, b, "nothing is written through the link")
}

// TestAuditExport: occ audit export pages through every record, in Seq
// order, as JSON lines.
func TestAuditExport(t *testing.T) {
	h := newHarness(t)
	for i := range 1100 {
		_, err := h.b.Apply(state.CmdRecordAudit, state.RecordAudit{Action: "oce.test", Resource: state.ClusterResource,
			Outcome: state.OutcomeSuccess, Details: map[string]string{"i": fmt.Sprint(i)}})
		require.NoError(t, err)
	}
	out := filepath.Join(h.dir, "audit.jsonl")
	require.Contains(t, h.ok("audit", "export", "--out", out), "1100 audit records written")
	st, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	require.Len(t, lines, 1100)
	var prev int64
	for _, l := range lines {
		var r struct{ Seq int64 }
		require.NoError(t, json.Unmarshal(l, &r))
		require.Greater(t, r.Seq, prev)
		prev = r.Seq
	}
	later := h.ok("audit", "export", "--after", fmt.Sprint(prev-3))
	require.Len(t, bytes.Split(bytes.TrimSpace([]byte(later)), []byte("\n")), 3)
}

// TestAuditNewestFirst: occ audit --limit N answers the newest N records,
// newest first; --oldest-first the oldest; --before pages back.
func TestAuditNewestFirst(t *testing.T) {
	h := newHarness(t)
	for i := range 30 {
		_, err := h.b.Apply(state.CmdRecordAudit, state.RecordAudit{Action: "oce.test", Resource: state.ClusterResource,
			Outcome: state.OutcomeSuccess, Details: map[string]string{"i": fmt.Sprint(i)}})
		require.NoError(t, err)
	}
	all := h.b.M.Audit(0, 0)
	last := all[len(all)-1].Seq
	seqs := func(args ...string) []int64 {
		var recs []struct{ Seq int64 }
		require.NoError(t, json.Unmarshal([]byte(h.ok(append([]string{"audit", "-o", "json"}, args...)...)), &recs))
		out := make([]int64, 0, len(recs))
		for _, r := range recs {
			out = append(out, r.Seq)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		want []int64
	}{
		{"newest first by default", []string{"--limit", "3"}, []int64{last, last - 1, last - 2}},
		{"the next page back", []string{"--limit", "2", "--before", fmt.Sprint(last - 2)}, []int64{last - 3, last - 4}},
		{"oldest first on request", []string{"--limit", "3", "--oldest-first"}, []int64{all[0].Seq, all[1].Seq, all[2].Seq}},
		{"after bounds from below", []string{"--after", fmt.Sprint(last - 2)}, []int64{last, last - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, seqs(tc.args...)) })
	}
	table := strings.Split(strings.TrimSpace(h.ok("audit", "--limit", "2")), "\n")
	require.Len(t, table, 3)
	require.True(t, strings.HasPrefix(table[1], fmt.Sprint(last)+" "), "the first row is the newest: %q", table[1])
}
