package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/shared/codes"
)

func TestInstallHosts(t *testing.T) {
	for _, tc := range []struct {
		namespace string
		want      []string
		code      codes.Code
	}{
		{namespace: "oce-system", want: []string{
			"*.oce-coordinator", "oce-coordinator", "*.oce-coordinator.oce-system.svc", "oce-coordinator.oce-system.svc",
			"oce-coordinator-api", "oce-coordinator-api.oce-system", "oce-coordinator-api.oce-system.svc",
			"oce-coordinator-api.oce-system.svc.cluster.local", "localhost", "127.0.0.1", "::1"}},
		{namespace: "t1", want: []string{
			"*.oce-coordinator", "oce-coordinator", "*.oce-coordinator.t1.svc", "oce-coordinator.t1.svc",
			"oce-coordinator-api", "oce-coordinator-api.t1", "oce-coordinator-api.t1.svc",
			"oce-coordinator-api.t1.svc.cluster.local", "localhost", "127.0.0.1", "::1"}},
		{namespace: "", code: codes.InvalidRequest},
		{namespace: "Oce", code: codes.InvalidRequest},
		{namespace: "oce.system", code: codes.InvalidRequest},
		{namespace: "-oce", code: codes.InvalidRequest},
		{namespace: strings.Repeat("a", 64), code: codes.InvalidRequest},
	} {
		t.Run(tc.namespace, func(t *testing.T) {
			got, err := certs.InstallHosts(tc.namespace)
			if tc.code != "" {
				require.ErrorIs(t, err, certs.ErrInvalidInput)
				require.Equal(t, tc.code, certs.Code(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// The certificate verifies, from the CA alone, for every name a client or
// member dials — a member's stable name, each API Service form, the
// port-forward's loopback — for server and client auth; a name of another
// namespace does not.
func TestNewInstallNamesEveryDialedHost(t *testing.T) {
	in, err := certs.NewInstall("oce-system", []string{"OCE.Example.com", "10.1.2.3"}, time.Now())
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(in.Cert, in.Key)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(in.CACert))
	_, err = tls.X509KeyPair(in.CACert, in.CAKey)
	require.NoError(t, err, "the CA key belongs to the CA")
	for _, host := range []string{
		"oce-coordinator-0.oce-coordinator", "oce-coordinator-2.oce-coordinator.oce-system.svc", "oce-coordinator",
		"oce-coordinator-api", "oce-coordinator-api.oce-system", "oce-coordinator-api.oce-system.svc",
		"oce-coordinator-api.oce-system.svc.cluster.local", "localhost", "127.0.0.1", "::1", "oce.example.com", "10.1.2.3",
	} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			_, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}})
			require.NoError(t, err, "%s, usage %v", host, usage)
		}
	}
	for _, host := range []string{"oce-coordinator-api.other.svc", "oce-coordinator-0.oce-coordinator.other.svc", "10.0.0.1"} {
		require.Error(t, pair.Leaf.VerifyHostname(host), host)
	}

	for _, extra := range []string{"", "a b", "https://x", "x:443", "a..b"} {
		_, err := certs.NewInstall("oce-system", []string{extra}, time.Now())
		require.ErrorIs(t, err, certs.ErrInvalidInput, "%q", extra)
	}
}

func TestWriteInstall(t *testing.T) {
	in, err := certs.NewInstall("oce-system", nil, time.Now())
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "out")
	f, err := certs.WriteInstall(dir, in, false)
	require.NoError(t, err)
	for p, want := range map[string][]byte{f.CA: in.CACert, f.CAKey: in.CAKey, f.Cert: in.Cert, f.Key: in.Key} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), p)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, want, got, p)
	}
	require.Equal(t, []string{"ca.crt", "ca.key", "tls.crt", "tls.key"},
		[]string{filepath.Base(f.CA), filepath.Base(f.CAKey), filepath.Base(f.Cert), filepath.Base(f.Key)})

	// Again: refused, nothing changes.
	again, err := certs.NewInstall("oce-system", nil, time.Now())
	require.NoError(t, err)
	_, err = certs.WriteInstall(dir, again, false)
	require.ErrorIs(t, err, certs.ErrExists)
	require.Equal(t, codes.ResourceConflict, certs.Code(err))
	key, err := os.ReadFile(f.Key)
	require.NoError(t, err)
	require.Equal(t, in.Key, key)

	// One file in the way is enough to refuse, and none is written.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "ca.key"), []byte("mine"), 0o600))
	_, err = certs.WriteInstall(other, again, false)
	require.ErrorContains(t, err, "ca.key")
	entries, err := os.ReadDir(other)
	require.NoError(t, err)
	require.Len(t, entries, 1)

	// With force: replaced.
	_, err = certs.WriteInstall(dir, again, true)
	require.NoError(t, err)
	key, err = os.ReadFile(f.Key)
	require.NoError(t, err)
	require.Equal(t, again.Key, key)
}
