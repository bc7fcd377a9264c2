package occ_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
)

// TestFollowHintKeepsConnection: the "follow it with" hint of an ended
// deploy --wait spells the namespace and the connection flags the user
// passed, so the copied line reaches the same Agent; never the token.
func TestFollowHintKeepsConnection(t *testing.T) {
	h := newHarness(t)
	h.seed()
	tokenFile := h.file("my token", token)
	h.file("occ.yaml", "contexts:\n- name: lab\n  server: "+h.url+"\n  namespace: team\n")
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    []string
		notWant []string
	}{
		{name: "-n", args: []string{"-n", "team"},
			want: []string{"follow it with: occ -n team revisions bot; occ -n team agent work bot; occ status"}},
		{name: "--namespace and --server", args: []string{"--namespace=team", "--server", h.url},
			want: []string{"occ --server " + h.url + " -n team revisions bot", "; occ --server " + h.url + " status"}},
		{name: "--context", args: []string{"--context", "lab"},
			want: []string{"occ --context lab -n team revisions bot", "occ --context lab -n team agent work bot", "occ --context lab status"}},
		{name: "OCC_NAMESPACE", env: map[string]string{"OCC_NAMESPACE": "team"}, args: nil,
			want: []string{"occ -n team revisions bot"}},
		{name: "token file quoted", args: []string{"-n", "team", "--token-file", tokenFile},
			want: []string{"occ --token-file '" + tokenFile + "' -n team revisions bot"}},
		{name: "never the token", args: []string{"-n", "team", "--token", token},
			want: []string{"occ -n team revisions bot"}, notWant: []string{token, "--token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				h.env[k] = v
			}
			t.Cleanup(func() {
				for k := range tc.env {
					delete(h.env, k)
				}
			})
			// No engine: the revision stays queued and the wait times out.
			r := h.run(append(tc.args, "agent", "deploy", "bot", "--wait", "--timeout", "50ms")...)
			require.Equal(t, occ.ExitTimeout, r.code, r.stderr)
			for _, w := range tc.want {
				require.Contains(t, r.stderr, w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, r.stderr, w)
			}
		})
	}
	require.Equal(t, "my token", filepath.Base(tokenFile), "the case above needs a path that must be quoted")
}
