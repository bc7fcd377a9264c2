// Package deploy holds the kustomize bundle that installs oce's coordinator
// (kubectl apply -k images/deploy); its tests apply it to a real API server.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/shared/logtest"
)

const (
	ns = "oce-system"
	sa = "oce-coordinator"
)

var env *k8stest.Env

// One real control plane (etcd, kube-apiserver with RBAC and Pod Security
// admission, controller-manager, scheduler, kwok) per test binary.
func TestMain(m *testing.M) { os.Exit(k8stest.Main(m, &env)) }

func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.BinDir, "kubectl"), append([]string{"--kubeconfig", filepath.Join(env.Dir, "admin.kubeconfig")}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

var applied bool

// apply server-side applies the bundle once (with the token Secret the
// install steps create first).
func apply(t *testing.T) string {
	t.Helper()
	if applied {
		return ""
	}
	out, err := kubectl(t, "apply", "--server-side", "--field-manager=oce-install", "-k", ".")
	require.NoError(t, err, out)
	out2, err := kubectl(t, "-n", ns, "create", "secret", "generic", "oce-coordinator-token", "--from-literal=token=0123456789abcdef0123456789abcdef")
	require.NoError(t, err, out2)
	applied = true
	return out
}

// The bundle applies server-side to a real API server and is what the
// issue asks: 3 members with one join list and one token Secret, Raft and
// API ports, a PDB of maxUnavailable 1, requests, probes, and Pods the
// restricted Pod Security profile admits.
func TestBundleAppliesServerSide(t *testing.T) {
	out := apply(t)
	require.NotContains(t, out, "violate", "no Pod Security warning")
	ctx := context.Background()
	c := env.Client

	sts, err := c.AppsV1().StatefulSets(ns).Get(ctx, "oce-coordinator", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), *sts.Spec.Replicas)
	require.Equal(t, sa, sts.Spec.Template.Spec.ServiceAccountName)
	ctr := sts.Spec.Template.Spec.Containers[0]
	require.Equal(t, "localhost/oce/coordinator:dev", ctr.Image)
	args := strings.Join(ctr.Args, " ")
	require.Contains(t, args, "--join=https://oce-coordinator-0.oce-coordinator:7400", "one join list naming member 0")
	require.Contains(t, args, "--http-advertise=$(POD_NAME).oce-coordinator:7400", "member 0 advertises what the list names")
	require.Contains(t, args, "--tls-cert=/etc/oce/tls/tls.crt", "the API serves TLS, members speak mutual TLS")
	require.Contains(t, args, "--token-file=/var/run/oce/token/token")
	for _, e := range ctr.Env {
		require.NotEqual(t, "OCE_JOIN", e.Name, "no per-replica join variable")
	}
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.Equal(t, map[string]int32{"raft": 7300, "http": 7400}, ports)
	require.NotNil(t, ctr.ReadinessProbe)
	require.NotNil(t, ctr.LivenessProbe)
	require.NotNil(t, ctr.StartupProbe)
	require.False(t, ctr.Resources.Requests.Cpu().IsZero())
	require.False(t, ctr.Resources.Requests.Memory().IsZero())
	var tokenVol *corev1.SecretVolumeSource
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "oce-coordinator-token" {
			tokenVol = v.Secret
		}
	}
	require.NotNil(t, tokenVol, "the token comes from one Secret")

	pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "oce-coordinator", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())

	// the StatefulSet controller creates the three Pods: Pod Security
	// (enforce: restricted) admitted them
	require.Eventually(t, func() bool {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=oce-coordinator"})
		return err == nil && len(pods.Items) == 3
	}, 60*time.Second, 200*time.Millisecond, "three coordinator Pods")
	nsObj, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"])

	// a second apply changes nothing
	out, err = kubectl(t, "apply", "--server-side", "--field-manager=oce-install", "-k", ".")
	require.NoError(t, err, out)
	require.NotContains(t, out, "configured")
}

// Every variable the driver reads is in the one ConfigMap, and documented.
func TestDriverConfigComplete(t *testing.T) {
	apply(t)
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "oce-coordinator-driver", metav1.GetOptions{})
	require.NoError(t, err)
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := append([]string{}, server.DriverEnv...)
	sort.Strings(want)
	require.Equal(t, want, keys)
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	require.NoError(t, err)
	for _, k := range server.DriverEnv {
		require.True(t, strings.Contains(string(doc), "`"+k+"`"), "docs/kubernetes.md documents %s", k)
	}
	for k, v := range cm.Data {
		if strings.HasSuffix(k, "_IMAGE") {
			require.True(t, kubernetes.ValidImageRef(v), "%s=%q", k, v)
		}
	}
}

func saUser() (string, []string) {
	return "system:serviceaccount:" + ns + ":" + sa, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

func allowed(t *testing.T, p kubernetes.Permission, namespace string) bool {
	t.Helper()
	user, groups := saUser()
	r, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// The bundle's RBAC is sufficient — every access the driver makes
// (kubernetes.Permissions, equal to what a recording client sees) is allowed
// to the coordinator's ServiceAccount, in a namespace the driver would
// create — and minimal: the ClusterRole grants exactly those, and neighbours
// the driver never uses are denied.
func TestRBACSufficientAndMinimal(t *testing.T) {
	apply(t)
	workNS := kubernetes.DataPlaneNamespace("tenant-1")
	for _, p := range kubernetes.Permissions {
		namespace := workNS
		if p.Resource == "namespaces" {
			namespace = ""
		}
		require.True(t, allowed(t, p, namespace), "%s is allowed", p)
	}
	for _, p := range []kubernetes.Permission{
		{Verb: "patch", Group: "apps", Resource: "deployments"},
		{Verb: "watch", Resource: "secrets"},
		{Verb: "create", Resource: "pods"},
		{Verb: "delete", Resource: "pods"},
		{Verb: "create", Resource: "pods", Subresource: "exec"},
		{Verb: "update", Resource: "pods", Subresource: "status"},
		{Verb: "deletecollection", Resource: "secrets"},
		{Verb: "update", Resource: "namespaces"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Verb: "get", Resource: "nodes"},
	} {
		require.False(t, allowed(t, p, workNS), "%s is denied", p)
	}

	// the ClusterRole's rules expand to exactly the driver's list
	cr, err := env.Client.RbacV1().ClusterRoles().Get(context.Background(), "oce-coordinator-driver", metav1.GetOptions{})
	require.NoError(t, err)
	var granted []string
	for _, r := range cr.Rules {
		require.Empty(t, r.ResourceNames)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted = append(granted, kubernetes.Permission{Verb: v, Group: g, Resource: res}.String())
				}
			}
		}
	}
	var want []string
	for _, p := range kubernetes.Permissions {
		want = append(want, p.String())
	}
	sort.Strings(granted)
	sort.Strings(want)
	require.Equal(t, want, granted)
}

// impersonating writes a kubeconfig acting as user (the admin's client
// certificate with impersonation).
func impersonating(t *testing.T, user string, groups []string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(filepath.Join(env.Dir, "admin.kubeconfig"))
	require.NoError(t, err)
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
		a.ImpersonateGroups = groups
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

// The coordinator with the Kubernetes driver starts with the bundle's
// ServiceAccount; with an account missing one permission it stops at start
// with one record naming what is missing (MISSING_PERMISSION), not a crash
// loop without a cause.
func TestCoordinatorStartChecksPermissions(t *testing.T) {
	apply(t)
	bin := filepath.Join(t.TempDir(), "coordinator")
	out, err := exec.Command("go", "build", "-o", bin, "oce.dev/oce/cmd/coordinator").CombinedOutput()
	require.NoError(t, err, string(out))

	run := func(kubeconfig string) (*exec.Cmd, *logtest.Buffer) {
		log := &logtest.Buffer{}
		cmd := exec.Command(bin, "--driver=kubernetes", "--data-dir="+t.TempDir(), "--raft-addr=127.0.0.1:0",
			"--http-addr=127.0.0.1:0")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "OCE_GATEWAY_IMAGE=localhost/oce/gateway:dev",
			"OCE_HARNESS_IMAGE=localhost/oce/harness:dev", "OCE_CREDENTIAL_NAMESPACE="+ns)
		cmd.Stderr = log
		require.NoError(t, cmd.Start())
		return cmd, log
	}

	// the bundle's account: started (it serves) and stops on SIGTERM
	user, groups := saUser()
	cmd, log := run(impersonating(t, user, groups))
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "coordinator started") }, 60*time.Second,
		100*time.Millisecond, "started: %s", log.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())

	// an account without the binding: one record, the code, what is missing
	cmd, log = run(impersonating(t, "system:serviceaccount:"+ns+":unbound", []string{"system:serviceaccounts", "system:authenticated"}))
	err = cmd.Wait()
	require.Error(t, err, "the start is refused")
	var errs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil && r["level"] == "ERROR" {
			errs = append(errs, r)
		}
	}
	require.Len(t, errs, 1, log.String())
	require.Equal(t, server.CodeMissingPermission, errs[0]["code"])
	msg := fmt.Sprint(errs[0]["error"])
	for _, p := range kubernetes.Permissions {
		require.Contains(t, msg, p.String(), "the record names every missing access")
	}
}
