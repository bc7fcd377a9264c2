package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/compute/memory"
)

func TestSelectDriverRule(t *testing.T) {
	type dir struct {
		recorded string // contents of compute-driver ("" = none)
		state    bool   // a raft.db exists
	}
	for _, tc := range []struct {
		name   string
		dir    dir
		named  string
		want   string
		err    error
		record string // what compute-driver holds afterwards
	}{
		{"fresh dir, no driver: a dev dir", dir{}, "", DriverMemory, nil, DriverMemory},
		{"dev dir, no driver", dir{recorded: DriverMemory, state: true}, "", DriverMemory, nil, DriverMemory},
		{"state without a record, no driver", dir{state: true}, "", "", ErrNoDriver, ""},
		{"kubernetes dir, no driver", dir{recorded: "kubernetes", state: true}, "", "", ErrNoDriver, "kubernetes"},
		{"fresh dir, named", dir{}, "local", "local", nil, "local"},
		{"legacy state, named: adopted", dir{state: true}, "kubernetes", "kubernetes", nil, "kubernetes"},
		{"same driver again", dir{recorded: "local", state: true}, "local", "local", nil, "local"},
		{"another driver", dir{recorded: "local", state: true}, "kubernetes", "", ErrDriverMismatch, "local"},
		{"memory dir, named real driver", dir{recorded: DriverMemory, state: true}, "local", "", ErrDriverMismatch, DriverMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if tc.dir.recorded != "" {
				require.NoError(t, os.WriteFile(filepath.Join(d, driverFile), []byte(tc.dir.recorded+"\n"), 0o600))
			}
			if tc.dir.state {
				require.NoError(t, os.WriteFile(filepath.Join(d, "raft.db"), nil, 0o600))
			}
			got, err := selectDriver(d, tc.named, false)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
			rec, err := readDriverFile(d)
			require.NoError(t, err)
			require.Equal(t, tc.record, rec)
		})
	}
	_, err := selectDriver(t.TempDir(), "nope", false)
	require.ErrorContains(t, err, "unknown driver")
}

func TestRunRefusesNonDevDirWithoutDriver(t *testing.T) {
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, driverFile), []byte("kubernetes\n"), 0o600))
	err := Run(context.Background(), Config{DataDir: d, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, ErrNoDriver)
	require.NoFileExists(t, filepath.Join(d, "raft.db"), "a refused start opens no store")
}

// TestRunServesDriverInstanceOnEveryListener: a driver instance and an
// extra listener (here a Unix socket, as occ dev uses) are served by the
// one assembly, with the same metrics.
func TestRunServesDriverInstanceOnEveryListener(t *testing.T) {
	d := t.TempDir()
	sock := filepath.Join(d, "extra.sock")
	extra, err := net.Listen("unix", sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	drv := memory.New(memory.DefaultCapabilities())
	go func() {
		done <- Run(ctx, Config{DataDir: d, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			APISocket: filepath.Join(d, "api.sock"), Listeners: []net.Listener{extra}, Driver: drv,
			Log: slog.New(slog.DiscardHandler)})
	}()
	token := func() string {
		b, err := os.ReadFile(filepath.Join(d, TokenFileName))
		if err != nil {
			return ""
		}
		return string(b[:len(b)-1])
	}
	// Every listener serves TLS with the dev CA the node made (no TLS flags).
	var pool *x509.CertPool
	require.Eventually(t, func() bool {
		pool, err = certs.LoadPool(filepath.Join(d, certs.DevDir, certs.CAFile))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)
	for _, s := range []string{sock, filepath.Join(d, "api.sock")} {
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", s)
		}, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
		require.Eventually(t, func() bool {
			req, _ := http.NewRequest(http.MethodGet, "https://coordinator/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+token())
			res, err := hc.Do(req)
			if err != nil {
				return false
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return res.StatusCode == http.StatusOK && contains(b, "oce_raft_applied_index") && contains(b, "oce_work_items")
		}, 20*time.Second, 20*time.Millisecond, s)
	}
	rec, err := readDriverFile(d)
	require.NoError(t, err)
	require.Equal(t, memory.Name, rec)
	cancel()
	require.NoError(t, <-done)
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
