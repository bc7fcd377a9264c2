package occ_test

import (
	"crypto/tls"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/occ"
)

// serviceName is the only name the test coordinator's certificate holds,
// as behind kubectl port-forward svc/oce-coordinator-api.
const serviceName = "oce-coordinator-api.oce-system.svc"

// TestTLSServerName: a coordinator whose certificate names only a Service
// DNS name, dialed at 127.0.0.1 (a port-forward), is refused without
// --tls-server-name with a message naming the flag, and reached with it
// (flag, environment or context).
func TestTLSServerName(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("occ-test-ca", now)
	require.NoError(t, err)
	certPEM, keyPEM, err := certs.Issue(caPEM, caKey, "oce-coordinator", []string{serviceName}, now, time.Hour)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry(),
		WithActor: apitest.WithActor}, apitest.New()))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	require.True(t, strings.HasPrefix(srv.URL, "https://127.0.0.1:"), srv.URL)
	ca := filepath.Join(h.dir, "ca.crt")
	require.NoError(t, os.WriteFile(ca, caPEM, 0o600))
	delete(h.env, "OCC_SERVER")
	ctxFile := `currentContext: pf
contexts:
- name: pf
  server: ` + srv.URL + `
  ca: ` + ca + `
  tlsServerName: ` + serviceName + `
- name: plain
  server: ` + srv.URL + `
  ca: ` + ca + `
`

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{name: "no server name", args: []string{"--context", "plain", "status"}, code: occ.ExitErr,
			want: []string{"does not name this server", "--tls-server-name"}},
		{name: "flag", args: []string{"--context", "plain", "--tls-server-name", serviceName, "status"}, code: occ.ExitOK,
			want: []string{"Cluster:", "Leader"}},
		{name: "flag with --server", args: []string{"--server", srv.URL, "--ca-file", ca, "--tls-server-name", serviceName, "status"},
			code: occ.ExitOK, want: []string{"Leader"}},
		{name: "wrong name", args: []string{"--context", "plain", "--tls-server-name", "other.example", "status"}, code: occ.ExitErr,
			want: []string{"does not name this server"}},
		{name: "environment", env: map[string]string{"OCC_TLS_SERVER_NAME": serviceName}, args: []string{"--context", "plain", "status"},
			code: occ.ExitOK, want: []string{"Leader"}},
		{name: "context", args: []string{"status"}, code: occ.ExitOK, want: []string{"Leader"}},
		{name: "flag over context", args: []string{"--tls-server-name", "other.example", "status"}, code: occ.ExitErr,
			want: []string{"does not name this server"}},
		{name: "a port is no name", args: []string{"--context", "plain", "--tls-server-name", serviceName + ":443", "status"},
			code: occ.ExitUsage, want: []string{"without scheme or port"}},
		{name: "a URL is no name", args: []string{"--context", "plain", "--tls-server-name", "https://" + serviceName, "status"},
			code: occ.ExitUsage, want: []string{"without scheme or port"}},
		{name: "plain http ignores it", args: []string{"--server", "http://127.0.0.1:1", "--tls-server-name", serviceName, "status"},
			code: occ.ExitUsage, want: []string{"not dialed over TLS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.file("occ.yaml", ctxFile)
			for k, v := range tc.env {
				h.env[k] = v
			}
			t.Cleanup(func() {
				for k := range tc.env {
					delete(h.env, k)
				}
			})
			r := h.run(tc.args...)
			require.Equal(t, tc.code, r.code, "%s%s", r.stdout, r.stderr)
			for _, w := range tc.want {
				require.Contains(t, r.stdout+r.stderr, w)
			}
		})
	}
}

// TestContextSetTLSServerName: context set saves the name (shown by
// context list -o wide) and refuses one with a port.
func TestContextSetTLSServerName(t *testing.T) {
	h := newHarness(t)
	h.ok("context", "set", "pf", "--server", "https://127.0.0.1:8443", "--tls-server-name", serviceName)
	require.NotContains(t, h.ok("context", "list"), serviceName, "a wide column")
	require.Contains(t, h.ok("context", "list", "-o", "wide"), serviceName)
	b, err := os.ReadFile(filepath.Join(h.dir, "occ.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(b), "tlsServerName: "+serviceName)
	r := h.run("context", "set", "bad", "--server", "https://127.0.0.1:8443", "--tls-server-name", "x:1")
	require.Equal(t, occ.ExitUsage, r.code, r.stderr)
	b, err = os.ReadFile(filepath.Join(h.dir, "occ.yaml"))
	require.NoError(t, err)
	require.NotContains(t, string(b), "bad", "a refused context is not saved")
}
