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
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"oce.dev/oce/shared/netns"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/logtest"
)

const (
	ns = "oce-system"
	sa = "oce-coordinator"
)

var env *k8stest.Env

// One real control plane (etcd, kube-apiserver with RBAC and Pod Security
// admission, controller-manager, scheduler, kwok) per test binary.
// TestMain runs the suite in a PID namespace of its own (host network): no
// control-plane or coordinator process outlives the binary.
func TestMain(m *testing.M) {
	netns.Main(netns.RunnerFunc(func() int { return k8stest.Main(m, &env) }), netns.Options{HostNetwork: true})
}

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
			Namespace: namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Name: p.Name}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// saClient is a clientset acting as the coordinator's ServiceAccount (the
// admin's certificate with impersonation).
func saClient(t *testing.T) k8s.Interface {
	t.Helper()
	user, groups := saUser()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := k8s.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// rulesOf expands a ClusterRole's rules to permission strings.
func rulesOf(t *testing.T, name string) []string {
	t.Helper()
	cr, err := env.Client.RbacV1().ClusterRoles().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var granted []string
	for _, r := range cr.Rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						granted = append(granted, kubernetes.Permission{Verb: v, Group: g, Resource: res, Name: n}.String())
					}
				}
			}
		}
	}
	sort.Strings(granted)
	return granted
}

func strs(ps []kubernetes.Permission) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}

// The bundle's RBAC is sufficient and minimal, and least privilege holds on
// the real API server: cluster-wide the coordinator's ServiceAccount may do
// only kubernetes.ClusterPermissions; the driver, acting as that account,
// creates a Namespace's two namespaces and binds kubernetes.NamespaceRole
// there itself (RBAC's escalation check and the admission policy pass);
// only then are kubernetes.NamespacePermissions allowed — there, and not in
// kube-system, the coordinator's own namespace or default. Both ClusterRoles
// expand to exactly the driver's lists, and neighbours it never uses are
// denied.
func TestRBACSufficientAndMinimal(t *testing.T) {
	apply(t)
	ctx := context.Background()
	dp, gw := kubernetes.DataPlaneNamespace("tenant-1"), kubernetes.GatewayNamespace("tenant-1")
	for _, p := range kubernetes.ClusterPermissions {
		namespace := ""
		if p.Resource == "rolebindings" {
			namespace = dp
		}
		require.True(t, allowed(t, p, namespace), "%s is allowed", p)
	}
	for _, p := range kubernetes.NamespacePermissions {
		require.False(t, allowed(t, p, dp), "%s before the driver bound its role there", p)
		require.False(t, allowed(t, p, ""), "%s cluster-wide", p)
	}

	// the driver, as the ServiceAccount, prepares the Namespace
	user, _ := saUser()
	subject, err := kubernetes.SubjectOf(user)
	require.NoError(t, err)
	me, err := kubernetes.Identity(ctx, saClient(t))
	require.NoError(t, err)
	require.Equal(t, subject, me, "the identity the coordinator binds is its ServiceAccount")
	d, err := kubernetes.New(kubernetes.Config{GatewayImage: "localhost/oce/gateway:dev", HarnessImage: "localhost/oce/harness:dev",
		Subject: me}, saClient(t))
	require.NoError(t, err)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "tenant-1", Quota: &state.NamespaceQuota{Agents: 2, CPU: "4"}}))
	for _, ns := range []string{dp, gw} {
		for _, p := range kubernetes.NamespacePermissions {
			require.True(t, allowed(t, p, ns), "%s is allowed in %s", p, ns)
		}
	}
	for _, ns := range []string{"kube-system", ns, "default"} {
		for _, p := range kubernetes.NamespacePermissions {
			require.False(t, allowed(t, p, ns), "%s is denied in %s", p, ns)
		}
	}
	for _, p := range []kubernetes.Permission{
		{Verb: "patch", Group: "apps", Resource: "deployments"},
		{Verb: "watch", Resource: "secrets"},
		// pods create and delete are granted (the probe Pod before cutover,
		// no more than the Deployments' Pods); exec into them is not
		{Verb: "create", Resource: "pods", Subresource: "exec"},
		{Verb: "update", Resource: "pods", Subresource: "status"},
		{Verb: "deletecollection", Resource: "secrets"},
		{Verb: "update", Resource: "namespaces"},
		{Verb: "list", Resource: "namespaces"},
		{Verb: "get", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Verb: "delete", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "roles"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-admin"},
		{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		{Verb: "get", Resource: "nodes"},
	} {
		require.False(t, allowed(t, p, dp), "%s is denied", p)
	}

	// the ClusterRoles' rules expand to exactly the driver's lists
	require.Equal(t, strs(kubernetes.ClusterPermissions), rulesOf(t, "oce-coordinator-driver"))
	require.Equal(t, strs(kubernetes.NamespacePermissions), rulesOf(t, kubernetes.NamespaceRole))
	rb, err := env.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, b := range rb.Items {
		require.NotEqual(t, kubernetes.NamespaceRole, b.RoleRef.Name, "the namespace role is never bound cluster-wide")
	}
}

// What `kubectl auth can-i --list` shows the coordinator's ServiceAccount:
// no access to Secrets anywhere but the namespaces it manages (cluster-wide,
// kube-system, its own namespace, default), every Secret verb denied there
// by SubjectAccessReview too, and no way into kube-system: the admission
// policy refuses binding itself there, creating an unlabelled namespace or
// deleting one oce does not manage.
func TestNoSecretOutsideManagedNamespaces(t *testing.T) {
	apply(t)
	ctx := context.Background()
	user, _ := saUser()
	dp := kubernetes.DataPlaneNamespace("tenant-2")
	d, err := kubernetes.New(kubernetes.Config{GatewayImage: "localhost/oce/gateway:dev", HarnessImage: "localhost/oce/harness:dev",
		Subject: mustSubject(t, user)}, saClient(t))
	require.NoError(t, err)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "tenant-2"}))

	canI := func(namespace string) string {
		out, err := kubectl(t, "auth", "can-i", "--list", "--as="+user, "--as-group=system:serviceaccounts",
			"--as-group=system:serviceaccounts:"+ns, "--as-group=system:authenticated", "-n", namespace)
		require.NoError(t, err, out)
		return out
	}
	secretRule := regexp.MustCompile(`(?m)^\s*(secrets|\*)(\.\S*)?\s`)
	for _, namespace := range []string{"kube-system", ns, "default"} {
		out := canI(namespace)
		require.NotRegexp(t, secretRule, out, "can-i --list in %s", namespace)
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
			require.False(t, allowed(t, kubernetes.Permission{Verb: verb, Resource: "secrets"}, namespace), "%s secrets in %s", verb, namespace)
		}
	}
	for _, verb := range []string{"get", "list", "watch"} {
		require.False(t, allowed(t, kubernetes.Permission{Verb: verb, Resource: "secrets"}, ""), "%s secrets cluster-wide", verb)
	}
	require.Regexp(t, secretRule, canI(dp), "a managed namespace: the driver's own Secrets")

	// the same answer from the API (SelfSubjectRulesReview, what can-i --list asks)
	for _, namespace := range []string{"kube-system", ns, "default"} {
		r, err := saClient(t).AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, rule := range r.Status.ResourceRules {
			for _, res := range rule.Resources {
				require.NotContains(t, []string{"secrets", "*"}, res, "rules in %s: %+v", namespace, rule)
			}
		}
	}

	// kube-system stays out of reach: admission refuses every way in
	sc := saClient(t)
	_, err = sc.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "oce-coordinator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: kubernetes.NamespaceRole},
		Subjects: []rbacv1.Subject{mustSubject(t, user)}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "bind itself in kube-system: %v", err)
	require.ErrorContains(t, err, "oce-coordinator-namespace, to itself")
	_, err = sc.RbacV1().RoleBindings(dp).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{mustSubject(t, user)}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "bind another role: %v", err)
	_, err = sc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-oce"}}, metav1.CreateOptions{})
	require.ErrorContains(t, err, "only namespaces labelled app.kubernetes.io/managed-by=oce")
	_, err = env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = sc.CoreV1().Namespaces().Delete(ctx, "someone-else", metav1.DeleteOptions{})
	require.ErrorContains(t, err, "only namespaces labelled app.kubernetes.io/managed-by=oce")
	other, err := env.Client.CoreV1().Namespaces().Get(ctx, "someone-else", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, other.DeletionTimestamp)
	require.NoError(t, d.DeleteNamespace(ctx, state.Namespace{ID: "tenant-2"}), "its own namespaces it deletes")
}

func mustSubject(t *testing.T, user string) rbacv1.Subject {
	t.Helper()
	s, err := kubernetes.SubjectOf(user)
	require.NoError(t, err)
	return s
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
			"OCE_HARNESS_IMAGE=localhost/oce/harness:dev")
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
