package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/occ"
)

// connectStep is the code block of docs/kubernetes.md "Install", step 5.
type connectStep struct {
	portForward []string          // kubectl's arguments, without the trailing &
	env         map[string]string // the exported OCC_SERVER, OCC_CA_FILE
	tokenCmd    string            // how OCC_TOKEN is read
	occ         [][]string        // occ's arguments, one command a line
}

// installDocConnectStep reads step 5's shell block from docs/kubernetes.md.
func installDocConnectStep(t *testing.T) connectStep {
	t.Helper()
	root, err := k8stest.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "5. **Use it**")
	require.GreaterOrEqual(t, start, 0, "docs/kubernetes.md has the install's step 5")
	step := doc[start:]
	open := strings.Index(step, "```sh\n")
	require.GreaterOrEqual(t, open, 0)
	block := step[open+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	s := connectStep{env: map[string]string{}}
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(strings.TrimSpace(line), "#")
		line = strings.TrimSpace(line)
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "kubectl" && strings.Contains(line, " port-forward "):
			require.Equal(t, "&", fields[len(fields)-1], "the port-forward runs in the background: %s", line)
			s.portForward = fields[1 : len(fields)-1]
		case strings.HasPrefix(line, "export OCC_TOKEN="):
			s.tokenCmd = strings.TrimPrefix(line, "export OCC_TOKEN=")
		case fields[0] == "export":
			for _, kv := range fields[1:] {
				k, v, ok := strings.Cut(kv, "=")
				require.True(t, ok, line)
				s.env[k] = v
			}
		case fields[0] == "occ":
			s.occ = append(s.occ, fields[1:])
		default:
			require.Failf(t, "a line the test does not follow", "%q", line)
		}
	}
	require.NotEmpty(t, s.portForward, "step 5 port-forwards")
	require.NotEmpty(t, s.occ, "step 5 runs occ")
	return s
}

// The install doc's connect step, as written: kubectl port-forward to the
// API Service, the token read from its Secret, then occ against
// https://127.0.0.1:PORT trusting only the CA of step 3 — no
// --tls-server-name: the certificate (certs.NewInstall) names the loopback
// address. kubectl and occ run in the node's network namespace, where the
// cluster's kubeconfig reaches the API server; 127.0.0.1 is that
// namespace's loopback, as it is the operator's own for a port-forward on
// their machine.
func TestInstallDocConnectStep(t *testing.T) {
	step := installDocConnectStep(t)
	require.Equal(t, []string{"-n", SystemNS, "port-forward", "svc/oce-coordinator-api", "8443:7400"}, step.portForward)
	require.Equal(t, map[string]string{"OCC_SERVER": "https://127.0.0.1:8443", "OCC_CA_FILE": "ca.crt"}, step.env)
	require.Equal(t, "$(kubectl -n oce-system get secret oce-coordinator-token -o jsonpath='{.data.token}' | base64 -d)", step.tokenCmd)
	for _, args := range step.occ {
		require.NotContains(t, strings.Join(args, " "), "tls-server-name", "the doc's occ needs no server-name override")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pf := startPortForward(t, step.portForward, "127.0.0.1:8443 -> 7400")
	t.Cleanup(pf.stop)

	// export OCC_TOKEN=$(kubectl … get secret … -o jsonpath='{.data.token}' | base64 -d)
	encoded, err := cluster.Kubectl(ctx, "-n", SystemNS, "get", "secret", "oce-coordinator-token", "-o", "jsonpath={.data.token}")
	require.NoError(t, err)
	token, err := base64.StdEncoding.DecodeString(encoded)
	require.NoError(t, err)
	require.Equal(t, oce.token, string(token))

	// OCC_CA_FILE=ca.crt: the CA of step 3, in the install directory.
	require.Equal(t, step.env["OCC_CA_FILE"], filepath.Base(oce.caFile))
	env := map[string]string{"OCC_SERVER": step.env["OCC_SERVER"], "OCC_CA_FILE": oce.caFile, "OCC_TOKEN": string(token)}
	// A fresh client dialing in the node's namespace: 127.0.0.1:8443 is
	// kubectl's listener there.
	hc := &http.Client{Transport: &http.Transport{DialContext: cluster.DialContext}}
	outputs := map[string]string{}
	for _, args := range step.occ {
		var out bytes.Buffer
		code := occ.Main(ctx, args, occ.Options{Stdout: &out, Stderr: &out, WorkDir: oce.dir,
			ConfigFile: filepath.Join(oce.dir, "no-occ.yaml"), Getenv: func(k string) string { return env[k] }, HTTPClient: hc})
		require.Equal(t, 0, code, "occ %s through the port-forward:\n%s\nkubectl: %s", strings.Join(args, " "), out.String(), pf.stderr.String())
		outputs[strings.Join(args, " ")] = out.String()
	}
	require.Contains(t, outputs["status"], "Cluster:", "occ status answered through the port-forward")
	for i := range coordinatorReplicas {
		require.Contains(t, outputs["cluster members"], fmt.Sprintf("oce-coordinator-%d", i))
	}
}
