package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/certs"
)

func TestEnsureDev(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	f, err := certs.EnsureDev(dir, []string{"10.1.2.3"}, now)
	require.NoError(t, err)
	for p, mode := range map[string]os.FileMode{f.CA: 0o644, f.Cert: 0o644, f.Key: 0o600, filepath.Join(dir, "ca.key"): 0o600} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, mode, st.Mode().Perm(), p)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	require.NoError(t, err)
	pool, err := certs.LoadPool(f.CA)
	require.NoError(t, err)
	for _, h := range []string{"127.0.0.1", "localhost", "10.1.2.3", "::1"} {
		_, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h})
		require.NoError(t, err, h)
	}
	ca, _ := os.ReadFile(f.CA)
	leaf, _ := os.ReadFile(f.Cert)

	// Again with the same hosts: nothing changes.
	_, err = certs.EnsureDev(dir, []string{"10.1.2.3"}, now)
	require.NoError(t, err)
	leaf2, _ := os.ReadFile(f.Cert)
	require.Equal(t, leaf, leaf2)
	// A new host: a new certificate from the same CA.
	_, err = certs.EnsureDev(dir, []string{"coordinator.example"}, now)
	require.NoError(t, err)
	leaf3, _ := os.ReadFile(f.Cert)
	ca3, _ := os.ReadFile(f.CA)
	require.NotEqual(t, leaf, leaf3)
	require.Equal(t, ca, ca3)
	// Nearing its end: issued again.
	_, err = certs.EnsureDev(dir, []string{"coordinator.example"}, now.Add(certs.LeafValidity-certs.RenewBefore/2))
	require.NoError(t, err)
	leaf4, _ := os.ReadFile(f.Cert)
	require.NotEqual(t, leaf3, leaf4)
	// A half-present CA is refused, never silently replaced.
	require.NoError(t, os.Remove(filepath.Join(dir, "ca.key")))
	_, err = certs.EnsureDev(dir, nil, now)
	require.ErrorContains(t, err, "incomplete")
}

func TestReloaderFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("test CA", now)
	require.NoError(t, err)
	write := func(cn string) {
		crt, key, err := certs.Issue(caPEM, caKey, cn, []string{"127.0.0.1"}, now, time.Hour)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "c.crt"), crt, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "c.key"), key, 0o600))
	}
	write("first")
	r, err := certs.NewReloader(filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key"))
	require.NoError(t, err)
	r.CheckEvery = 0
	require.Equal(t, "first", r.Certificate().Leaf.Subject.CommonName)
	write("second")
	require.Equal(t, "second", r.Certificate().Leaf.Subject.CommonName)
	// A broken rotation keeps the previous pair and reports it.
	var reported error
	r.OnError = func(err error) { reported = err }
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.key"), []byte("not a key, and longer than before"), 0o600))
	require.Equal(t, "second", r.Certificate().Leaf.Subject.CommonName)
	require.Error(t, reported)
	_, err = certs.NewReloader(filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key"))
	require.Error(t, err, "a bad pair does not start")
}

func TestPeerTLSNeedsTheClusterCA(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	member := func(caPEM, caKey []byte, name string) *certs.Reloader {
		crt, key, err := certs.Issue(caPEM, caKey, name, []string{"127.0.0.1"}, now, time.Hour)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".crt"), crt, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".key"), key, 0o600))
		r, err := certs.NewReloader(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		require.NoError(t, err)
		return r
	}
	caPEM, caKey, _ := certs.NewCA("cluster", now)
	otherPEM, otherKey, _ := certs.NewCA("other", now)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	a, b, x := member(caPEM, caKey, "a"), member(caPEM, caKey, "b"), member(otherPEM, otherKey, "x")
	leaf := func(r *certs.Reloader) [][]byte { return r.Certificate().Certificate }
	require.NoError(t, certs.VerifyChain(leaf(a), pool, x509.ExtKeyUsageServerAuth))
	require.NoError(t, certs.VerifyChain(leaf(b), pool, x509.ExtKeyUsageClientAuth))
	require.Error(t, certs.VerifyChain(leaf(x), pool, x509.ExtKeyUsageServerAuth))
	require.Error(t, certs.VerifyChain(nil, pool, x509.ExtKeyUsageServerAuth))
}
