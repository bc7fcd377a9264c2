package main

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/server"
)

func TestFlagDefaultsAndEnv(t *testing.T) {
	cmd := command()
	for flag, want := range map[string]string{
		"data-dir": server.DefaultDataDir, "raft-addr": server.DefaultRaftAddr, "http-addr": server.DefaultHTTPAddr,
		"driver": "", "join": "", "api-socket": "", "local-root": "", "node-id": "", "raft-heartbeat-timeout": "400ms", "raft-leader-lease-timeout": "200ms",
		"rate-limit-principal": "50", "rate-limit-principal-burst": "200", "rate-limit-failed-auth": "1", "rate-limit-failed-auth-burst": "20",
		"audit-max-age": "2160h0m0s", "audit-max-records": "100000", "audit-export-dir": "", "http-idle-timeout": "2m0s", "oidc-jwks-refresh": "30s",
		"kube-qps": "", "kube-burst": "", // empty: OCE_KUBE_QPS / OCE_KUBE_BURST, then the driver's defaults
		"cold-standby": "", // empty: OCE_COLD_STANDBY, then warm followers
	} {
		require.Equal(t, want, cmd.Flags().Lookup(flag).DefValue, flag)
	}
	t.Setenv("OCE_DATA_DIR", "/var/lib/oce")
	t.Setenv("OCE_RAFT_ADDR", "10.0.0.1:7300")
	t.Setenv("OCE_HTTP_ADDR", "10.0.0.1:7400")
	t.Setenv("OCE_NODE_ID", "c-0")
	t.Setenv("OCE_JOIN", "c-0.oce:7400")
	cmd = command()
	for flag, want := range map[string]string{
		"data-dir": "/var/lib/oce", "raft-addr": "10.0.0.1:7300", "http-addr": "10.0.0.1:7400", "node-id": "c-0", "join": "c-0.oce:7400",
	} {
		require.Equal(t, want, cmd.Flags().Lookup(flag).DefValue, flag)
	}
	cmd.SetArgs([]string{"extra"})
	require.Error(t, cmd.Execute(), "positional arguments are refused")
}

// `coordinator certs` writes the four files for the namespace asked, and
// refuses bad input and files in the way with a code, writing nothing.
func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	fresh := filepath.Join(t.TempDir(), "fresh") // where a refused command would have written
	for _, tc := range []struct {
		name    string
		args    []string
		errCode string // empty: succeeds
	}{
		{name: "writes", args: []string{"certs", "--namespace", "team-a", "--out", dir, "--extra-host", "oce.example.com"}},
		{name: "refuses to overwrite", args: []string{"certs", "--namespace", "team-a", "--out", dir}, errCode: "RESOURCE_CONFLICT"},
		{name: "bad namespace", args: []string{"certs", "--namespace", "Team", "--out", fresh}, errCode: "INVALID_REQUEST"},
		{name: "bad extra host", args: []string{"certs", "--out", fresh, "--extra-host", "https://x"}, errCode: "INVALID_REQUEST"},
		{name: "no out", args: []string{"certs", "--namespace", "team-a"}, errCode: "INVALID_REQUEST"},
		{name: "unknown flag", args: []string{"certs", "--out", fresh, "--bogus"}, errCode: "INVALID_REQUEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := command()
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.errCode != "" {
				require.Error(t, err)
				require.Contains(t, errOut.String(), "coordinator certs: "+tc.errCode+": ")
				require.NoDirExists(t, fresh)
				return
			}
			require.NoError(t, err, errOut.String())
			require.Contains(t, out.String(), "oce-coordinator-api.team-a.svc, ")
			require.Contains(t, out.String(), "kubectl -n team-a create secret generic oce-coordinator-tls")
		})
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	require.NoError(t, err)
	require.Contains(t, pair.Leaf.DNSNames, "oce-coordinator-api.team-a.svc.cluster.local")
	require.Contains(t, pair.Leaf.DNSNames, "oce.example.com")
	for _, name := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), name)
	}
}

// --kube-qps and --kube-burst reach the kubernetes driver, winning over
// their variables: a bad one stops the start with the flag named; a good
// one over a bad variable gets the start past the rate limit (to the image,
// refused here so nothing is contacted).
func TestKubeRateFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	t.Setenv("KUBECONFIG", kc)
	t.Setenv("OCE_GATEWAY_IMAGE", "Not An Image")
	t.Setenv("OCE_HARNESS_IMAGE", "localhost/oce/harness:1")
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "bad flag", args: []string{"--kube-qps", "0"}, wantErr: `--kube-qps="0"`},
		{name: "bad burst flag over a good variable", args: []string{"--kube-burst", "x"}, env: map[string]string{"OCE_KUBE_BURST": "10"}, wantErr: `--kube-burst="x"`},
		{name: "bad variable", env: map[string]string{"OCE_KUBE_QPS": "-5"}, wantErr: `OCE_KUBE_QPS="-5"`},
		{name: "good flag over a bad variable", args: []string{"--kube-qps", "20"}, env: map[string]string{"OCE_KUBE_QPS": "-5"}, wantErr: "OCE_GATEWAY_IMAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OCE_KUBE_QPS", "")
			t.Setenv("OCE_KUBE_BURST", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cmd := command()
			cmd.SetArgs(append([]string{"--driver", "kubernetes", "--data-dir", t.TempDir(), "--insecure",
				"--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "error"}, tc.args...))
			err := cmd.Execute()
			require.ErrorIs(t, err, server.ErrDriverConfig)
			require.Equal(t, server.CodeNotConfigured, server.StartCode(err))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// --cold-standby is a boolean flag as written (bare, or =false) that leaves
// OCE_COLD_STANDBY its say when absent; a bad value stops the start before
// anything is opened, the flag or variable named.
func TestColdStandbyFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--cold-standby"}, "true"},
		{[]string{"--cold-standby=false"}, "false"},
	} {
		cmd := command()
		require.NoError(t, cmd.ParseFlags(tc.args))
		require.Equal(t, tc.want, cmd.Flags().Lookup("cold-standby").Value.String(), "%v", tc.args)
	}
	for _, tc := range []struct {
		args    []string
		env     string
		wantErr string
	}{
		{[]string{"--cold-standby=sometimes"}, "", `--cold-standby="sometimes"`},
		{nil, "yes please", `OCE_COLD_STANDBY="yes please"`},
	} {
		t.Setenv("OCE_COLD_STANDBY", tc.env)
		dir := filepath.Join(t.TempDir(), "data")
		cmd := command()
		cmd.SetArgs(append([]string{"--data-dir", dir, "--insecure", "--raft-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "error"}, tc.args...))
		err := cmd.Execute()
		require.ErrorIs(t, err, server.ErrDriverConfig)
		require.Equal(t, server.CodeNotConfigured, server.StartCode(err))
		require.ErrorContains(t, err, tc.wantErr)
		_, statErr := os.Stat(dir)
		require.True(t, os.IsNotExist(statErr), "nothing written before the refusal")
	}
}
