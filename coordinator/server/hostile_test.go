package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/local"
	"oce.dev/oce/coordinator/state"
)

// TestRefusedDriverReturnsTheRealError: a driver factory that refuses with
// a typed nil driver (as local.New does) makes Run return the refusal, not
// panic on the way out calling into nil.
func TestRefusedDriverReturnsTheRealError(t *testing.T) {
	refusal := errors.New("the driver refuses to start here")
	RegisterDriver("refusing-test", func(Config) (compute.Driver, error) {
		var d *local.Driver
		return d, refusal
	})
	t.Cleanup(func() {
		driversMu.Lock()
		defer driversMu.Unlock()
		delete(drivers, "refusing-test")
	})
	err := Run(t.Context(), Config{DataDir: t.TempDir(), DriverName: "refusing-test", Insecure: true,
		RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Log: discard()})
	require.ErrorIs(t, err, refusal)

	// The local driver itself, with binaries present, on this (host)
	// network: whatever it refuses with is what Run returns.
	bin := t.TempDir()
	for _, b := range []string{"gatewayd", "harnessd", "nodehost"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o755))
	}
	err = Run(t.Context(), Config{DataDir: t.TempDir(), DriverName: local.Name, Insecure: true,
		RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Local: LocalConfig{BinDir: bin}, Log: discard()})
	require.Error(t, err)
	require.Contains(t, err.Error(), "local")
}

// TestIdleConnectionsClosed: a keep-alive connection idle past IdleTimeout
// and a connection that never sends its request header are closed by the
// server; an oversized request header is refused.
func TestIdleConnectionsClosed(t *testing.T) {
	addr, _ := runNode(t, Config{DataDir: t.TempDir(), Insecure: true,
		IdleTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 300 * time.Millisecond})
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + addr + "/livez")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)

	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, c)
		return err == nil // EOF: the server closed it (a deadline is an error)
	}
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = fmt.Fprintf(idle, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, closedWithin(idle, 5*time.Second), "an idle keep-alive connection is closed")

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()
	_, err = fmt.Fprintf(silent, "GET /livez HTTP/1.1\r\n") // and never the rest
	require.NoError(t, err)
	require.True(t, closedWithin(silent, 5*time.Second), "a connection that never finishes its header is closed")

	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/namespaces/"+strings.Repeat("a", 2*MaxHeaderBytes), nil)
	require.NoError(t, err)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode)
}

// TestAuditRetention: the leader prunes the audit log to its count limit
// through the replicated command, exporting the pruned records (0600)
// first; the prune is itself recorded.
func TestAuditRetention(t *testing.T) {
	dir, export := t.TempDir(), t.TempDir()
	addr, _ := runNode(t, Config{DataDir: dir, Insecure: true,
		AuditRetention: AuditRetention{MaxRecords: 5, Every: 50 * time.Millisecond, ExportDir: export}})
	tok := readToken(t, dir)
	call := func(method, path string, body any) (int, []byte) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, out
	}
	require.Eventually(t, func() bool {
		s, _ := call("GET", "/v1/namespaces", nil)
		return s == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	for i := range 20 {
		s, b := call("POST", "/v1/namespaces", map[string]any{"name": fmt.Sprintf("ns-%d", i)})
		require.Equal(t, http.StatusCreated, s, "%s", b)
	}
	var recs []state.AuditRecord
	require.Eventually(t, func() bool {
		s, b := call("GET", "/v1/audit?limit=100", nil)
		var list struct{ Items []state.AuditRecord }
		if s != http.StatusOK || json.Unmarshal(b, &list) != nil {
			return false
		}
		recs = list.Items
		return len(recs) <= 5 && recs[len(recs)-1].Action == state.AuditPrune
	}, 20*time.Second, 50*time.Millisecond)
	prune := recs[len(recs)-1]
	require.Equal(t, retentionActor, prune.Actor)
	files, err := filepath.Glob(filepath.Join(export, "audit-*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	exported := 0
	for _, f := range files {
		st, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var r state.AuditRecord
			require.NoError(t, json.Unmarshal(line, &r))
			require.Less(t, r.Seq, recs[0].Seq, "only pruned records are exported")
			exported++
		}
	}
	require.GreaterOrEqual(t, exported, 15, "every pruned record was exported")
	require.Contains(t, prune.Details["export"], "audit-")
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
