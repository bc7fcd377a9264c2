package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/coordinator/compute/memory"
)

// syncBuffer is a log sink tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runNode runs a coordinator serving on a TCP listener; it returns the
// address and stops with the test.
func runNode(t *testing.T, cfg Config) (string, *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logs := &syncBuffer{}
	cfg.RaftAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Listeners = []net.Listener{ln}
	cfg.Driver = memory.New(memory.DefaultCapabilities())
	cfg.Log = slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return ln.Addr().String(), logs
}

func readToken(t *testing.T, dir string) string {
	t.Helper()
	var tok string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, TokenFileName))
		tok = strings.TrimSpace(string(b))
		return err == nil && tok != ""
	}, 10*time.Second, 10*time.Millisecond)
	return tok
}

// TestDevTLS: with no TLS flags the API serves TLS from a local CA in the
// data dir; a client that trusts it works, one that does not fails with a
// plain error, plain HTTP is told to use TLS, and a replaced certificate is
// served without a restart.
func TestDevTLS(t *testing.T) {
	dir := t.TempDir()
	addr, _ := runNode(t, Config{DataDir: dir})
	tok := readToken(t, dir)
	caFile := filepath.Join(dir, certs.DevDir, certs.CAFile)
	var pool *x509.CertPool
	var err error
	require.Eventually(t, func() bool { pool, err = certs.LoadPool(caFile); return err == nil }, 10*time.Second, 10*time.Millisecond)
	ctx := context.Background()

	trusted := client.New(addr, tok, client.WithCA(pool))
	require.Eventually(t, func() bool { return trusted.Ready(ctx) == nil }, 20*time.Second, 20*time.Millisecond)
	who, err := trusted.WhoAmI(ctx)
	require.NoError(t, err)
	require.Equal(t, "bootstrap", who.Actor)

	err = client.New("https://"+addr, tok).Ready(ctx)
	require.ErrorIs(t, err, client.ErrUntrusted)
	require.Contains(t, err.Error(), "--ca-file")
	err = client.New("http://"+addr, tok).Ready(ctx)
	require.ErrorContains(t, err, "speaks TLS")

	// Rotate the member certificate in place: new connections get it.
	caPEM, _ := os.ReadFile(caFile)
	caKey, _ := os.ReadFile(filepath.Join(dir, certs.DevDir, "ca.key"))
	crt, key, err := certs.Issue(caPEM, caKey, "rotated", certs.DevHosts, time.Now(), time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, certs.DevDir, certs.KeyFile), key, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, certs.DevDir, certs.CertFile), crt, 0o644))
	require.Eventually(t, func() bool {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName == "rotated"
	}, 20*time.Second, 50*time.Millisecond, "the rotated certificate is served")
}

// TestInsecure: plain HTTP only when asked for, with a warning.
func TestInsecure(t *testing.T) {
	dir := t.TempDir()
	addr, logs := runNode(t, Config{DataDir: dir, Insecure: true})
	tok := readToken(t, dir)
	cl := client.New("http://"+addr, tok)
	require.Eventually(t, func() bool { return cl.Ready(context.Background()) == nil }, 20*time.Second, 20*time.Millisecond)
	require.Contains(t, logs.String(), "INSECURE")
	_, err := os.Stat(filepath.Join(dir, certs.DevDir))
	require.True(t, os.IsNotExist(err), "no CA is made for an insecure node")
}

func TestSecurityRefusals(t *testing.T) {
	for name, cfg := range map[string]Config{
		"joining without the cluster CA": {Join: "127.0.0.1:1"},
		"half the TLS files":             {TLSCert: "a.crt"},
		"insecure with TLS files":        {Insecure: true, TLSCert: "a", TLSKey: "b", TLSCA: "c"},
		"authorization off with TLS":     {Authorization: AuthorizationOff},
		"unknown authorization":          {Insecure: true, Authorization: "maybe"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.DataDir, cfg.RaftAddr, cfg.HTTPAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
			cfg.Log = slog.New(slog.DiscardHandler)
			cfg.Driver = memory.New(memory.DefaultCapabilities())
			require.Error(t, Run(context.Background(), cfg))
		})
	}
}
