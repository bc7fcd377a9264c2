package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/occ"
)

// occHTTP dials from inside the node's network namespace: the API Service
// (and its CoreDNS name) exists only there.
var occHTTP = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: cluster.DialContext, MaxIdleConnsPerHost: 8}}
})

// runOcc runs the occ command tree (what the occ binary runs) against the
// coordinator's API Service, trusting the cluster CA, with the token in
// its environment (never in argv). It returns the output and exit code.
func runOcc(ctx context.Context, args ...string) (string, int) {
	var out bytes.Buffer
	code := occ.Main(ctx, append([]string{"--server", APIServer, "--ca-file", oce.caFile}, args...), occ.Options{
		Stdout: &out, Stderr: &out, WorkDir: oce.dir, ConfigFile: filepath.Join(oce.dir, "no-occ.yaml"),
		Getenv: func(k string) string {
			if k == "OCC_TOKEN" {
				return oce.token
			}
			return ""
		},
		HTTPClient: occHTTP(), PollInterval: 250 * time.Millisecond})
	return out.String(), code
}

// mustOcc runs occ and requires exit 0.
func mustOcc(t testing.TB, args ...string) string {
	t.Helper()
	out, code := runOcc(t.Context(), args...)
	require.Equal(t, 0, code, "occ %s:\n%s", strings.Join(args, " "), out)
	return out
}

// occJSON runs an occ read command with -o json into v.
func occJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	out := mustOcc(t, append([]string{"-o", "json"}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
}

// clusterView is `occ cluster members -o json` (no testing.T: the
// installation waits on it).
func clusterView(ctx context.Context) (wire.Cluster, error) {
	var c wire.Cluster
	out, code := runOcc(ctx, "-o", "json", "cluster", "members")
	if code != 0 {
		return c, &occError{out}
	}
	return c, json.Unmarshal([]byte(out), &c)
}

type occError struct{ out string }

func (e *occError) Error() string { return "occ: " + strings.TrimSpace(e.out) }
