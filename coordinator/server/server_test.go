package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
)

func TestLoadOrCreateToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "token")
	tok, err := LoadOrCreateToken(path)
	require.NoError(t, err)
	require.Len(t, tok, 2*tokenBytes)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	again, err := LoadOrCreateToken(path)
	require.NoError(t, err)
	require.Equal(t, tok, again, "the token is stable across starts")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = LoadOrCreateToken(path)
	require.ErrorIs(t, err, ErrInsecureToken)

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = LoadOrCreateToken(empty)
	require.ErrorIs(t, err, ErrInsecureToken)
}

func TestResolveNodeID(t *testing.T) {
	dir := t.TempDir()
	id, err := resolveNodeID(dir, "alpha")
	require.NoError(t, err)
	require.Equal(t, "alpha", id)
	id, err = resolveNodeID(dir, "")
	require.NoError(t, err)
	require.Equal(t, "alpha", id, "the stored id wins when none is configured")
	_, err = resolveNodeID(dir, "beta")
	require.ErrorContains(t, err, "does not match")

	other := t.TempDir()
	id, err = resolveNodeID(other, "")
	require.NoError(t, err)
	require.NotEmpty(t, id)
}

func TestJoinFollowsLeaderHint(t *testing.T) {
	var got atomic.Value
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/cluster/join", r.URL.Path)
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		_, _ = w.Write([]byte("{}"))
	}))
	defer leader.Close()
	var followerHits atomic.Int32
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		followerHits.Add(1)
		w.WriteHeader(http.StatusMisdirectedRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "NOT_LEADER",
			"details": map[string]any{"leader": leader.Listener.Addr().String()}}})
	}))
	defer follower.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := wire.ClusterJoin{ID: "n2", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}
	require.NoError(t, joinCluster(ctx, slog.New(slog.DiscardHandler), follower.Listener.Addr().String(), "tok", req))
	require.EqualValues(t, 1, followerHits.Load())
	require.JSONEq(t, `{"id":"n2","raftAddr":"127.0.0.1:1","httpAddr":"127.0.0.1:2"}`, got.Load().(string))
}

func TestJoinGivesUpWithContext(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := joinCluster(ctx, slog.New(slog.DiscardHandler), refusing.Listener.Addr().String(), "tok", wire.ClusterJoin{ID: "n2"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestRunEmbeddedDefaultLayout(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Log: slog.New(slog.DiscardHandler)})
	}()
	tokenPath := filepath.Join(dir, TokenFileName)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "raft.db"))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	st, err := os.Stat(tokenPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	// TLS by default: a local CA and the member's certificate, key 0600.
	for name, mode := range map[string]os.FileMode{"tls/ca.crt": 0o644, "tls/ca.key": 0o600, "tls/node.crt": 0o644, "tls/node.key": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Equal(t, mode, st.Mode().Perm(), name)
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(DefaultShutdownTimeout + 5*time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestRunRejectsUnknownDriver(t *testing.T) {
	err := Run(context.Background(), Config{DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		DriverName: "nope", Log: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "unknown driver")
}

// One join list serves every StatefulSet member: the member it names drops
// itself (and bootstraps), the others keep it.
func TestJoinTargetsDropsSelf(t *testing.T) {
	list := "http://oce-coordinator-0.oce-coordinator.oce-system.svc:7400"
	require.Equal(t, "", joinTargets(list, "http://oce-coordinator-0.oce-coordinator.oce-system.svc:7400/"))
	require.Equal(t, list, joinTargets(list, "http://oce-coordinator-1.oce-coordinator.oce-system.svc:7400"))
	require.Equal(t, "http://b:7400", joinTargets(" http://a:7400 , http://b:7400,", "http://a:7400"))
	require.Equal(t, "", joinTargets("", "http://a:7400"))
	require.Equal(t, "", joinTargets("https://oce-coordinator-0.oce-coordinator:7400", "oce-coordinator-0.oce-coordinator:7400"),
		"TLS members advertise host:port and join https://")
}
