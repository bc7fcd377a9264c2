package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/status"
)

// The test binary doubles as a fake gatewayd / harnessd that implements the
// contract's observable behaviour (docs/RUNTIME-CONTRACT.md): a status
// server on OCE_STATUS_ADDR with /readyz and /openclaw/runtime/status, a held
// AUTHENTICATION_FAILED when its model credential is "bad", gatewayd's
// authenticated setup-code and node-list routes, a Harness that consumes the
// one-use enrollment file (refusing one that is not mode 0600), and a
// descendant that ignores SIGTERM so stops must clean up after it.
const envFake = "LOCAL_FAKE_SUPERVISOR"

// envEvents names a file the fakes append "<role> <event>" lines to.
const envEvents = "LOCAL_FAKE_EVENTS"

// envProbeGate names a file a probe-only fake waits for before its probe
// "passes" (it shows the model-probe phase meanwhile).
const envProbeGate = "LOCAL_FAKE_PROBE_GATE"

func fakeMain() {
	role := "harness"
	if os.Getenv("OCE_TOPOLOGY") != "" {
		role = "gateway"
	}
	if os.Getenv("OCE_MODEL_PROBE_ONLY") == "1" {
		role = "probe"
	}
	event := func(e string) {
		f, err := os.OpenFile(os.Getenv(envEvents), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %s %s\n", role, os.Getenv("OCE_REVISION_ID"), e)
			f.Close()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv := status.New(status.Options{Addr: os.Getenv("OCE_STATUS_ADDR"), Component: role, RevisionID: os.Getenv("OCE_REVISION_ID")})
	secrets := os.Getenv("OCE_SECRETS_DIR")
	keyFile := "model-api-key"
	if role == "harness" {
		keyFile = "openai-api-key"
	}
	if b, err := os.ReadFile(filepath.Join(secrets, keyFile)); err == nil && strings.TrimSpace(string(b)) == "bad" {
		srv.Hold(status.RuntimeFailure{Check: "model-probe", Code: codes.Code("AUTHENTICATION_FAILED")})
	}
	if role == "probe" {
		fakeProbe(ctx, srv, event)
		return
	}
	if at := os.Getenv("OCE_MODEL_PROBE_PASSED_AT"); at != "" {
		event("vouched")
	}
	// A grandchild that outlives a graceful stop unless the driver kills it.
	child := exec.Command("sleep", "600")
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	_ = child.Start()

	var mu sync.Mutex
	minted := map[string]bool{}
	// Paired nodes outlive a gateway restart, as OpenClaw's device store
	// does in its state directory.
	paired := filepath.Join(os.Getenv("OPENCLAW_STATE_DIR"), "fake-paired")
	if b, err := os.ReadFile(paired); err == nil {
		for _, c := range strings.Fields(string(b)) {
			minted[c] = true
		}
	}
	if role == "gateway" {
		if n := os.Getenv("OCE_WORKSPACE_NODE_ID"); n != "" {
			event("pinned " + n)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("OPENCLAW_GATEWAY_PORT"))
		if err == nil {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					fmt.Fprintf(c, "gateway %s\n", os.Getenv("OCE_REVISION_ID"))
					c.Close()
				}
			}()
		}
		tok, _ := os.ReadFile(os.Getenv("OCE_STATUS_TOKEN_FILE"))
		auth := func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+string(tok) }
		_ = srv.HandleFunc("POST /oce/v1/setup-code", func(w http.ResponseWriter, r *http.Request) {
			if !auth(r) {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			mu.Lock()
			code := fmt.Sprintf("code-%d", len(minted)+1)
			minted[code] = true
			if f, err := os.OpenFile(paired, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
				fmt.Fprintln(f, code)
				f.Close()
			}
			mu.Unlock()
			event("minted")
			_ = json.NewEncoder(w).Encode(map[string]any{"setupCode": code, "expiresAtMs": time.Now().Add(time.Minute).UnixMilli()})
		}, status.AuthNone)
		_ = srv.HandleFunc("PUT /oce/v1/workspace/files/{name}", func(w http.ResponseWriter, r *http.Request) {
			if !auth(r) {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": "WORKSPACE_CONFLICT", "current": r.PathValue("name")})
		}, status.AuthNone)
		_ = srv.HandleFunc("GET /oce/v1/nodes", func(w http.ResponseWriter, r *http.Request) {
			if !auth(r) {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			b, _ := os.ReadFile(filepath.Join(os.Getenv("OCE_NODE_WORKSPACE_DIR"), ".fake-node"))
			mu.Lock()
			ok := minted[strings.TrimSpace(string(b))]
			mu.Unlock()
			nodes := []map[string]any{}
			if ok {
				id := "node-1" // a node with an identity of its own
				if b, err := os.ReadFile(filepath.Join(os.Getenv("OCE_NODE_WORKSPACE_DIR"), ".fake-node-id")); err == nil {
					id = string(b) // the provisioned identity it adopted
				}
				nodes = append(nodes, map[string]any{"nodeId": id, "connected": true, "commands": []string{"file.read"}})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"nodes": nodes})
		}, status.AuthNone)
	} else {
		go func() {
			path := os.Getenv("OCE_NODEHOST_ENROLLMENT_FILE")
			for ctx.Err() == nil {
				if st, err := os.Stat(path); err == nil {
					if st.Mode().Perm() != 0o600 {
						event("insecure-enrollment")
					} else if b, err := os.ReadFile(path); err == nil {
						_ = os.Remove(path)
						adoptIdentity(event)
						_ = os.WriteFile(filepath.Join(os.Getenv("OCE_WORKSPACE_DIR"), ".fake-node"), b, 0o600)
						event("enrolled")
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		if err := os.WriteFile(filepath.Join(os.Getenv("OCE_WORKSPACE_DIR"), "harness-was-here"), nil, 0o600); err != nil {
			event("workspace-unwritable")
		}
	}
	srv.SetStarted()
	srv.SetReady(true)
	event("started")
	go func() { _ = srv.ListenAndServe(ctx) }()
	<-ctx.Done()
	event("term")
	if role == "gateway" {
		time.Sleep(150 * time.Millisecond) // a drain, so a too-early Harness stop shows in the order
	}
	event("exit")
	os.Exit(0)
}

// fakeProbe is a probe-only gatewayd: the model-probe phase until the gate
// file exists (when one is named), then ready with the time it passed.
func fakeProbe(ctx context.Context, srv *status.Server, event func(string)) {
	go func() { _ = srv.ListenAndServe(ctx) }()
	event("started")
	if _, held := srv.Held(); !held {
		srv.SetPhase("model-probe")
		for gate := os.Getenv(envProbeGate); gate != "" && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(gate); err == nil {
				break
			}
		}
		_ = srv.SetStatus("modelProbe", map[string]any{"code": "READY", "passedAtMs": time.Now().UnixMilli()})
		srv.SetStarted()
		srv.SetReady(true)
		event("passed")
	}
	<-ctx.Done()
	event("exit")
	os.Exit(0)
}

// adoptIdentity plays nodehost adopting a provisioned identity: the device
// id of OCE_NODEHOST_IDENTITY_FILE (mode 0600) becomes the node's, as the
// fake gateway then lists it; the file is deleted.
func adoptIdentity(event func(string)) {
	path := os.Getenv("OCE_NODEHOST_IDENTITY_FILE")
	st, err := os.Stat(path)
	if err != nil {
		return
	}
	if st.Mode().Perm() != 0o600 {
		event("insecure-identity")
		return
	}
	var id struct {
		DeviceID string `json:"deviceId"`
	}
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &id) == nil && id.DeviceID != "" {
		_ = os.WriteFile(filepath.Join(os.Getenv("OCE_WORKSPACE_DIR"), ".fake-node-id"), []byte(id.DeviceID), 0o600)
		_ = os.Remove(path)
		event("adopted-identity")
	}
}
