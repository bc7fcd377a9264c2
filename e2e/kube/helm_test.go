package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/images/helm/helmtest"
	"oce.dev/oce/images/imagestest"
	"oce.dev/oce/occ"
)

// HelmNS is where the Helm test installs the chart: the suite's own
// installation (the kustomize bundle) holds oce-system and the
// cluster-wide singletons, so the doc's commands run with oce-system
// replaced by HelmNS and --set rbac.createClusterResources=false added to
// helm install and upgrade —
// the only two changes, both what docs/kubernetes.md says a second
// installation on one cluster needs.
const HelmNS = "oce-helm"

// helmDocStep is one line of docs/kubernetes.md "Install with Helm".
type helmDocStep struct {
	kind string // run, port-forward, export, occ
	line string
}

// helmDocBlock reads the first ```sh block after marker in
// docs/kubernetes.md, one step a line (comments dropped).
func helmDocBlock(t *testing.T, marker string) []helmDocStep {
	t.Helper()
	root, err := k8stest.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, marker)
	require.GreaterOrEqual(t, start, 0, "docs/kubernetes.md has %q", marker)
	step := doc[start:]
	open := strings.Index(step, "```sh\n")
	require.GreaterOrEqual(t, open, 0)
	block := step[open+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	var steps []helmDocStep
	for _, line := range strings.Split(block, "\n") {
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0 || strings.HasPrefix(line, "#"):
		case fields[0] == "kubectl" && strings.Contains(line, " port-forward "):
			require.Equal(t, "&", fields[len(fields)-1], "the port-forward runs in the background: %s", line)
			steps = append(steps, helmDocStep{"port-forward", line})
		case fields[0] == "export":
			steps = append(steps, helmDocStep{"export", line})
		case fields[0] == "occ":
			steps = append(steps, helmDocStep{"occ", line})
		case fields[0] == "kubectl" || fields[0] == "helm":
			steps = append(steps, helmDocStep{"run", line})
		default:
			require.Failf(t, "a line the test does not follow", "%q", line)
		}
	}
	return steps
}

// helmRun follows the doc's lines in the node's network namespace, in dir
// (where values.yaml and ca.crt are, and images/ links to the
// repository's), with the pinned kubectl and helm on PATH, with oce-system
// replaced by ns.
type helmRun struct {
	t        *testing.T
	ns       string
	dir      string
	path     string
	helmEnv  []string
	env      map[string]string // the doc's exports, evaluated
	pfCancel []context.CancelFunc
}

func newHelmRun(t *testing.T, ns string) *helmRun {
	t.Helper()
	bin, err := helmtest.Binary(t.Context())
	require.NoError(t, err)
	root, err := k8stest.RepoRoot()
	require.NoError(t, err)
	dir, err := os.MkdirTemp(cluster.Dir, "helm-")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(filepath.Join(root, "images"), filepath.Join(dir, "images")))
	h := &helmRun{t: t, ns: ns, dir: dir, path: filepath.Dir(bin) + ":" + cluster.BinDir + ":" + os.Getenv("PATH"),
		env: map[string]string{}}
	for _, kv := range helmtest.Env(filepath.Join(dir, ".helm")) {
		if strings.HasPrefix(kv, "HELM_") {
			h.helmEnv = append(h.helmEnv, kv)
		}
	}
	t.Cleanup(h.stopPortForwards)
	return h
}

// stopPortForwards ends the port-forwards started so far.
func (h *helmRun) stopPortForwards() {
	for _, c := range h.pfCancel {
		c()
	}
	h.pfCancel = nil
}

// adapt is the doc's line as the test runs it (h.ns; the second
// installation's flag on helm install and upgrade).
func (h *helmRun) adapt(line string) string {
	line = strings.ReplaceAll(line, SystemNS, h.ns)
	if strings.HasPrefix(line, "helm install ") || strings.HasPrefix(line, "helm upgrade ") {
		line += " --set rbac.createClusterResources=false"
	}
	return line
}

// sh runs a shell line in the node's namespaces, in h.dir, and returns
// stdout.
func (h *helmRun) sh(ctx context.Context, line string) (string, error) {
	cmd := cluster.CommandIn(ctx, h.dir, "bash", "-o", "pipefail", "-c", line)
	cmd.Env = append(cmd.Env, "PATH="+h.path)
	cmd.Env = append(cmd.Env, h.helmEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", line, err, stderr.String())
	}
	return stdout.String(), nil
}

func (h *helmRun) mustSh(line string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 20*time.Minute)
	defer cancel()
	out, err := h.sh(ctx, line)
	require.NoError(h.t, err)
	return out
}

// portForward starts the doc's background port-forward and waits until
// kubectl listens.
func (h *helmRun) portForward(line string) {
	h.t.Helper()
	fields := strings.Fields(line)
	h.pfCancel = append(h.pfCancel, startPortForward(h.t, fields[1:len(fields)-1], "127.0.0.1:").stop)
}

// export evaluates the doc's export line in the shell and keeps the
// variables for occ (never in occ's argv).
func (h *helmRun) export(line string) {
	h.t.Helper()
	for _, kv := range splitExports(strings.TrimPrefix(line, "export ")) {
		k, v, ok := strings.Cut(kv, "=")
		require.True(h.t, ok, line)
		val := h.mustSh("printf '%s' " + v)
		if k == "OCC_CA_FILE" && !filepath.IsAbs(val) {
			val = filepath.Join(h.dir, val)
		}
		h.env[k] = val
	}
}

// splitExports splits "A=x B=$(cmd with spaces)" into its assignments.
func splitExports(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ' ':
			if depth == 0 {
				if i > start {
					out = append(out, s[start:i])
				}
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// occ runs occ's command tree in process with the doc's exported
// environment, dialing in the node's network namespace.
func (h *helmRun) occ(ctx context.Context, args ...string) (string, int) {
	var out bytes.Buffer
	code := occ.Main(ctx, args, occ.Options{Stdout: &out, Stderr: &out, WorkDir: h.dir,
		ConfigFile: filepath.Join(h.dir, "no-occ.yaml"), Getenv: func(k string) string { return h.env[k] },
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: cluster.DialContext}}, PollInterval: 250 * time.Millisecond})
	return out.String(), code
}

// follow runs the doc's steps; it returns each occ command's output.
func (h *helmRun) follow(steps []helmDocStep) map[string]string {
	t := h.t
	t.Helper()
	outputs := map[string]string{}
	for _, s := range steps {
		line := h.adapt(s.line)
		t.Logf("doc: %s", line)
		switch s.kind {
		case "run":
			h.mustSh(line)
		case "port-forward":
			h.portForward(line)
		case "export":
			h.export(line)
		case "occ":
			args := strings.Fields(line)[1:]
			out, code := h.occ(t.Context(), args...)
			require.Equal(t, 0, code, "%s:\n%s", line, out)
			outputs[strings.Join(args, " ")] = out
		}
	}
	return outputs
}

// helmValues is the values.yaml the doc's helm install reads: the images
// as the suite loaded them into the node's containerd.
func helmValues(t *testing.T, dir string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("images:\n")
	for _, name := range []string{imagestest.Coordinator, imagestest.Gateway, imagestest.Harness} {
		ref := oce.images[name].Ref
		i := strings.LastIndex(ref, ":")
		require.Greater(t, i, strings.LastIndex(ref, "/"), "%s has a tag", ref)
		fmt.Fprintf(&b, "  %s: {repository: %q, tag: %q}\n", name, ref[:i], ref[i+1:])
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(b.String()), 0o600))
}

// helmAPI reads the Helm installation through its API Service (any Ready
// member), as a client inside the cluster does; the port-forward sticks
// to one Pod and a roll replaces every one.
func (h *helmRun) helmAPI(ctx context.Context, args ...string) (string, int) {
	return h.occ(ctx, append([]string{"--server", "https://oce-coordinator-api." + h.ns + ".svc:7400"}, args...)...)
}

func (h *helmRun) members(t *testing.T) wire.Cluster {
	t.Helper()
	var c wire.Cluster
	out, code := h.helmAPI(t.Context(), "-o", "json", "cluster", "members")
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &c), out)
	return c
}

// requireFormed: replicas voters, one leader, every member at the
// leader's applied index.
func (h *helmRun) requireFormed(t *testing.T, replicas int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var c wire.Cluster
		out, code := h.helmAPI(t.Context(), "-o", "json", "cluster", "members")
		if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.LeaderID == "" || len(c.Members) != replicas {
			return false
		}
		for _, m := range c.Members {
			if m.Suffrage != "voter" {
				return false
			}
		}
		return true
	}, 3*time.Minute, 500*time.Millisecond, "%d voters and a leader", replicas)
}

// poller reads the Helm installation's status through its API Service
// every 250 ms while a roll runs, and reports the longest stretch without
// an answer.
type poller struct {
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	ok, bad int
	worst   time.Duration
}

func (h *helmRun) poll() *poller {
	ctx, cancel := context.WithCancel(h.t.Context())
	p := &poller{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		lastOK := time.Now()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, code := h.helmAPI(rctx, "status")
			rcancel()
			p.mu.Lock()
			if code == 0 {
				p.ok++
				lastOK = time.Now()
			} else if ctx.Err() == nil {
				p.bad++
				p.worst = max(p.worst, time.Since(lastOK))
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *poller) finish() (ok, bad int, worst time.Duration) {
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.bad, p.worst
}

func (h *helmRun) statefulSet(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	s, err := cluster.Client.AppsV1().StatefulSets(h.ns).Get(t.Context(), "oce-coordinator", metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// rolled waits until the StatefulSet's roll is complete: every member at
// the update revision and Ready.
func (h *helmRun) rolled(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	var s *appsv1.StatefulSet
	require.Eventually(t, func() bool {
		s = h.statefulSet(t)
		st := s.Status
		return st.ObservedGeneration == s.Generation && st.UpdateRevision == st.CurrentRevision &&
			st.UpdatedReplicas == *s.Spec.Replicas && st.ReadyReplicas == *s.Spec.Replicas
	}, 5*time.Minute, time.Second, "the roll completes")
	return s
}

// podUIDs are the coordinator Pods' UIDs by name.
func podUIDs(t *testing.T) map[string]string {
	t.Helper()
	l, err := cluster.Client.CoreV1().Pods(HelmNS).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=oce-coordinator"})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range l.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// docs/kubernetes.md "Install with Helm", followed line by line on the
// real node: helm install (the chart, the suite's images), the CA from
// the generated Secret, a port-forward, `occ status` and three voters.
// Then the coordinator upgrade procedure: a changed value rolls the
// StatefulSet one member at a time while the API Service keeps answering,
// and a user created before is there after; `helm rollback` to revision 1
// renders revision 1's manifest again and rolls back with the state kept;
// `helm uninstall` removes every object of the chart but the members'
// PersistentVolumeClaims, which docs/kubernetes.md says stay.
func TestHelmInstallUpgradeRollback(t *testing.T) {
	h := newHelmRun(t, HelmNS)
	t.Cleanup(func() { // leave the cluster as the suite had it
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, _ = h.sh(ctx, "helm uninstall oce --namespace "+HelmNS+" --wait --ignore-not-found")
		_, _ = h.sh(ctx, "kubectl delete namespace "+HelmNS+" --ignore-not-found --wait=true")
		_, _ = h.sh(ctx, "kubectl delete clusterrolebinding oce-coordinator-driver-"+HelmNS+" --ignore-not-found")
	})
	helmValues(t, h.dir)

	install := helmDocBlock(t, "## Install with Helm")
	var sawHelm bool
	for _, s := range install {
		sawHelm = sawHelm || strings.HasPrefix(s.line, "helm install ")
	}
	require.True(t, sawHelm, "the doc's block runs helm install")
	start := time.Now()
	outputs := h.follow(install)
	figure(t, "helm install (doc steps, --wait) to occ status", time.Since(start))
	require.Contains(t, outputs["status"], "Cluster:", "occ status answered through the port-forward")
	for i := range 3 {
		require.Contains(t, outputs["cluster members"], fmt.Sprintf("oce-coordinator-%d", i))
	}
	h.requireFormed(t, 3)

	// state written before the upgrade
	out, code := h.helmAPI(t.Context(), "user", "create", "helm-e2e")
	require.Equal(t, 0, code, out)
	rev1 := h.statefulSet(t).Status.UpdateRevision
	before := podUIDs(t)
	require.Len(t, before, 3)

	// the documented upgrade, with a value that changes the Pod template
	upgrade := helmDocBlock(t, "## Upgrading the coordinator")
	require.NotEmpty(t, upgrade)
	p := h.poll()
	start = time.Now()
	for _, s := range upgrade {
		require.Equal(t, "run", s.kind, s.line)
		require.True(t, strings.HasPrefix(s.line, "helm upgrade "), "the upgrade block is helm upgrade: %s", s.line)
		// quoted: helm, not the shell, must see the escaped dot of the key;
		// a string, as the schema wants annotations
		h.mustSh(h.adapt(s.line) + " --set-string 'podAnnotations.oce\\.dev/e2e-roll=2'")
	}
	ok, bad, worst := p.finish()
	figure(t, "helm upgrade rolling 3 members", time.Since(start))
	figure(t, "helm upgrade: longest API Service gap", worst)
	t.Logf("during the roll the API Service answered %d reads, %d not", ok, bad)
	after := podUIDs(t)
	require.Len(t, after, 3)
	for name, uid := range before {
		require.NotEqual(t, uid, after[name], "%s was replaced by the roll", name)
	}
	sts := h.rolled(t)
	require.NotEqual(t, rev1, sts.Status.UpdateRevision)
	require.Equal(t, "2", sts.Spec.Template.Annotations["oce.dev/e2e-roll"])
	require.Positive(t, ok)
	require.Less(t, worst, 30*time.Second, "the API Service kept answering while one member at a time rolled")
	h.requireFormed(t, 3)
	out, code = h.helmAPI(t.Context(), "user", "list")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "helm-e2e", "the state survived the roll")

	// rollback: revision 3 is revision 1's rendering
	h.mustSh("helm rollback oce 1 --namespace " + HelmNS + " --wait --timeout 10m")
	m1 := h.mustSh("helm get manifest oce --namespace " + HelmNS + " --revision 1")
	m3 := h.mustSh("helm get manifest oce --namespace " + HelmNS + " --revision 3")
	require.Equal(t, m1, m3, "the rollback applied revision 1's manifest")
	sts = h.rolled(t)
	require.Equal(t, rev1, sts.Status.UpdateRevision, "the Pod template is revision 1's again")
	require.NotContains(t, sts.Spec.Template.Annotations, "oce.dev/e2e-roll")
	h.requireFormed(t, 3)
	out, code = h.helmAPI(t.Context(), "user", "list")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "helm-e2e", "the state survived the rollback")

	// uninstall: nothing of the chart stays but the members' claims
	h.mustSh("helm uninstall oce --namespace " + HelmNS + " --wait")
	ctx := t.Context()
	c := cluster.Client
	_, err := c.AppsV1().StatefulSets(HelmNS).Get(ctx, "oce-coordinator", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "StatefulSet: %v", err)
	for _, name := range []string{"oce-coordinator", "oce-coordinator-api"} {
		_, err = c.CoreV1().Services(HelmNS).Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "Service %s: %v", name, err)
	}
	for _, name := range []string{"oce-coordinator-token", "oce-coordinator-tls"} {
		_, err = c.CoreV1().Secrets(HelmNS).Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "Secret %s: %v", name, err)
	}
	_, err = c.CoreV1().ConfigMaps(HelmNS).Get(ctx, "oce-coordinator-driver", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "ConfigMap: %v", err)
	_, err = c.CoreV1().ServiceAccounts(HelmNS).Get(ctx, "oce-coordinator", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "ServiceAccount: %v", err)
	_, err = c.PolicyV1().PodDisruptionBudgets(HelmNS).Get(ctx, "oce-coordinator", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "PodDisruptionBudget: %v", err)
	np, err := c.NetworkingV1().NetworkPolicies(HelmNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, np.Items)
	_, err = c.RbacV1().ClusterRoleBindings().Get(ctx, "oce-coordinator-driver-"+HelmNS, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "ClusterRoleBinding: %v", err)
	_, err = c.RbacV1().ClusterRoles().Get(ctx, "oce-coordinator-namespace", metav1.GetOptions{})
	require.NoError(t, err, "the suite's installation keeps the shared ClusterRole")
	rel, err := c.CoreV1().Secrets(HelmNS).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	require.NoError(t, err)
	require.Empty(t, rel.Items, "no release record")
	pvcs, err := c.CoreV1().PersistentVolumeClaims(HelmNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var claims []string
	for _, p := range pvcs.Items {
		claims = append(claims, p.Name)
	}
	require.ElementsMatch(t, []string{"data-oce-coordinator-0", "data-oce-coordinator-1", "data-oce-coordinator-2"}, claims,
		"the members' data stays, as documented")
}
