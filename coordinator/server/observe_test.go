package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
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
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/logtest"
)

// duplicateKey returns the first key a JSON object repeats at its top
// level ("" when none).
func duplicateKey(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		k, _ := tok.(string)
		if seen[k] {
			return k, nil
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	return "", nil
}

func TestDuplicateKeyDetector(t *testing.T) {
	k, err := duplicateKey([]byte(`{"component":"api","msg":"x","component":"engine"}`))
	require.NoError(t, err)
	require.Equal(t, "component", k)
	k, err = duplicateKey([]byte(`{"component":"api","nested":{"component":"x"}}`))
	require.NoError(t, err)
	require.Empty(t, k)
}

// TestOneAssemblyObservability: a running coordinator exports Raft's own
// metrics (through go-metrics' Prometheus sink) beside the store's and
// the API's, and writes no log record with a repeated key.
func TestOneAssemblyObservability(t *testing.T) {
	d := t.TempDir()
	var logs logtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{DataDir: d, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			APISocket: filepath.Join(d, "api.sock"),
			Log:       slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	var cl *client.Client
	require.Eventually(t, func() bool {
		tok, err := os.ReadFile(filepath.Join(d, TokenFileName))
		if err != nil {
			return false
		}
		// Every listener serves TLS with the dev CA the node made.
		pool, err := certs.LoadPool(filepath.Join(d, certs.DevDir, certs.CAFile))
		if err != nil {
			return false
		}
		cl = client.New("unix://"+filepath.Join(d, "api.sock"), strings.TrimSpace(string(tok)), client.WithCA(pool))
		return cl.Ready(t.Context()) == nil
	}, 20*time.Second, 20*time.Millisecond)
	_, err := cl.CreateNamespace(t.Context(), "team")
	require.NoError(t, err)

	body := scrape(t, d)
	for _, want := range []string{"oce_raft_state_leader", "oce_raft_leader 1", "oce_raft_applied_index",
		"oce_api_requests_total", "oce_work_items", "oce_agents{state=\"serving\"} 0",
		"# TYPE oce_tls_certificate_expiry_timestamp_seconds gauge"} {
		require.Contains(t, body, want)
	}
	cancel()
	require.NoError(t, <-done)
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	lines := 0
	for sc.Scan() {
		lines++
		k, err := duplicateKey(sc.Bytes())
		require.NoError(t, err, sc.Text())
		require.Empty(t, k, "a record repeats %q: %s", k, sc.Text())
	}
	require.Greater(t, lines, 5, "the coordinator logged its start and stop")
}

// scrape reads /metrics over the API socket (TLS with the dev CA).
func scrape(t *testing.T, dataDir string) string {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(dataDir, TokenFileName))
	require.NoError(t, err)
	pool, err := certs.LoadPool(filepath.Join(dataDir, certs.DevDir, certs.CAFile))
	require.NoError(t, err)
	sock := filepath.Join(dataDir, "api.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	req, _ := http.NewRequest(http.MethodGet, "https://coordinator/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	return string(b)
}
