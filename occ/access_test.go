package occ_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/occ"
)

// TestTokensAndContexts: a cluster-admin makes a user and a role binding,
// mints the user's token (shown once), the user logs in with it into a
// context and acts within the role; the token is revoked and stops working;
// the audit shows who did what.
func TestTokensAndContexts(t *testing.T) {
	h := newHarness(t)
	h.seed()
	h.ok("user", "create", "alice", "--group", "devs")
	require.Contains(t, h.ok("user", "list"), "alice")
	h.ok("-n", "team", "rolebinding", "create", "--role", "deployer", "--user", "alice")
	require.Contains(t, h.ok("rolebinding", "list"), "user:alice")
	tokFile := filepath.Join(h.dir, "alice.token")
	out := h.ok("token", "create", "--user", "alice", "--name", "laptop", "--out", tokFile)
	require.Contains(t, out, "written to")
	st, err := os.Stat(tokFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	tok, _ := os.ReadFile(tokFile)
	require.NotContains(t, out, strings.TrimSpace(string(tok)), "the token goes only to the file")

	// A context for alice; login checks the token and records it.
	h.ok("context", "set", "alice", "--server", h.url, "--namespace", "team")
	require.Contains(t, h.ok("context", "list"), "alice")
	h.ok("context", "use", "alice")
	require.Contains(t, h.ok("login", "--token-file", tokFile), "logged in as user:alice")
	var fc occ.FileConfig
	b, err := os.ReadFile(filepath.Join(h.dir, "occ.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, &fc))
	require.Equal(t, "alice", fc.CurrentContext)
	require.Equal(t, tokFile, fc.Contexts[0].TokenFile)
	require.Equal(t, "team", fc.Contexts[0].Namespace)

	// As alice (the context's token; OCC_SERVER is not set for her).
	delete(h.env, "OCC_SERVER")
	require.Contains(t, h.ok("whoami"), "user:alice")
	require.Contains(t, h.ok("agent", "deploy", "bot"), "pending")
	r := h.run("namespace", "create", "mine")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "FORBIDDEN")
	// Her own tokens: create, list, rotate.
	own := h.ok("token", "create", "--ttl", "1h", "-o", "json")
	require.Contains(t, own, authn.TokenPrefix)
	list := h.ok("token", "list")
	require.Contains(t, list, "user:alice")
	require.Contains(t, list, "laptop")

	// Back to the bootstrap identity: audit filters and actors.
	audit := h.ok("--context", "alice", "--token-file", filepath.Join(h.dir, ".oce", "coordinator", "token"),
		"audit", "--actor", "user:alice")
	require.Contains(t, audit, "openclaw.agents.lifecycle.deploy")
	require.Contains(t, audit, `Agent::"team/bot"`)
	require.Contains(t, audit, "denied", "her refused namespace creation is audited")
	require.NotContains(t, audit, "oce.users.create", "filtered by actor")
	boot := []string{"--token-file", filepath.Join(h.dir, ".oce", "coordinator", "token")}
	require.Contains(t, h.ok(append(boot, "audit", "--action", "oce.users.create")...), "bootstrap")
	inTeam := h.ok(append(boot, "audit", "--since", "1h", "-n", "team")...)
	require.Contains(t, inTeam, `Namespace::"team"`)
	require.NotContains(t, inTeam, "oce.users.create", "users are cluster-wide, not team's")
	r = h.run(append(boot, "audit", "-n", "nowhere")...)
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "NOT_FOUND")

	// Revoke alice's laptop token: her context stops working.
	var toks []wire.Token
	require.NoError(t, yaml.Unmarshal([]byte(h.ok(append(boot, "token", "list", "--user", "alice", "-o", "yaml")...)), &toks))
	var laptop string
	for _, k := range toks {
		if k.Name == "laptop" {
			laptop = k.ID
		}
	}
	require.NotEmpty(t, laptop)
	h.ok(append(boot, "token", "revoke", laptop)...)
	r = h.run("whoami")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "UNAUTHORIZED")
}

func TestRestrictionCommand(t *testing.T) {
	h := newHarness(t)
	bad := h.file("bad.cedar", "forbid (principal, action, resource)\nwhen { context.nope };")
	r := h.run("restriction", "apply", "bad", "-f", bad)
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "line 2")
	good := h.file("good.cedar", `forbid (principal, action == Action::"DeployAgent", resource) when { context.customEndpoint };`)
	require.Contains(t, h.ok("restriction", "apply", "no-custom", "-f", good), "applied")
	require.Contains(t, h.ok("restriction", "list"), "no-custom")
	h.ok("restriction", "delete", "no-custom")
}

// TestTLSAndDeviceLogin: occ trusts the CA of its context; without it the
// error says what to do; occ login gets an ID token from the issuer the
// coordinator names with the device grant.
func TestTLSAndDeviceLogin(t *testing.T) {
	dir := t.TempDir()
	files, err := certs.EnsureDev(filepath.Join(dir, "tls"), nil, time.Now())
	require.NoError(t, err)
	is, err := oidctest.New("oce-occ")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	is.ApproveDevices("zoe", []string{"ops"})
	o, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-occ"})
	require.NoError(t, err)
	b := apitest.New()
	authr := authn.New(authn.Config{Bootstrap: "boot", Machine: b.M, OIDC: o})
	srv := httptest.NewUnstartedServer(api.New(api.Config{Authenticator: authr, Metrics: prometheus.NewRegistry(),
		OIDC: &wire.OIDCConfig{Issuer: is.URL(), Audience: "oce-occ"}}, b))
	rl, err := certs.NewReloader(files.Cert, files.Key)
	require.NoError(t, err)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*rl.Certificate()}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfgFile := filepath.Join(dir, "occ.yaml")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := occ.Main(context.Background(), args, occ.Options{Stdout: &out, Stderr: &errb,
			Getenv: func(string) string { return "" }, ConfigFile: cfgFile, WorkDir: dir})
		return code, out.String(), errb.String()
	}
	code, _, stderr := run("--server", srv.URL, "--token", "boot", "status")
	require.Equal(t, occ.ExitErr, code)
	require.Contains(t, stderr, "not trusted")
	require.Contains(t, stderr, "--ca-file")
	code, out, stderr := run("context", "set", "prod", "--server", srv.URL, "--ca-file", files.CA)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "saved")

	code, out, stderr = run("login")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "enter the code")
	require.Contains(t, out, "logged in as user:oidc:zoe")
	code, out, stderr = run("whoami")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "oidc:ops")
	st, err := os.Stat(filepath.Join(dir, "tokens", "prod"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

// The scrape identity docs/OPERATIONS.md "Monitoring" makes with occ: a user
// bound to metrics-reader cluster-wide; the role is refused within a
// Namespace.
func TestMetricsReaderBinding(t *testing.T) {
	h := newHarness(t)
	h.ok("namespace", "create", "team")
	h.ok("user", "create", "prometheus")
	r := h.run("-n", "team", "rolebinding", "create", "--role", "metrics-reader", "--user", "prometheus")
	require.NotEqual(t, 0, r.code, "metrics-reader is not granted within a namespace")
	h.ok("rolebinding", "create", "--role", "metrics-reader", "--cluster", "--user", "prometheus")
	out := h.ok("rolebinding", "list")
	require.Contains(t, out, "metrics-reader")
	require.Contains(t, out, "user:prometheus")
}
