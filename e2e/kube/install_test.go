package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/images/imagestest"
	"oce.dev/oce/probe/fakeprovider"
)

// The installation's names and deadlines.
const (
	// SystemNS is the deploy bundle's namespace.
	SystemNS = "oce-system"
	// ProviderNS holds the fake provider's Deployment and Service.
	ProviderNS = "oce-fake-provider"
	// ProviderURL is the fake provider's Service, the model endpoint the
	// driver renders into every Gateway and Harness.
	ProviderURL = "http://fake-provider." + ProviderNS + ".svc:8080"
	// APIServer is the coordinator's API Service, as occ reaches it.
	APIServer = "https://oce-coordinator-api." + SystemNS + ".svc:7400"
	// FakeReply is the fake provider's reply text.
	FakeReply = "KUBE-E2E-FAKE-REPLY"
	// FakeproviderImage is the FROM-scratch image of cmd/fakeprovider.
	FakeproviderImage = "oce.local/e2e/fakeprovider:1"
	// ModelSecret is the team's credential source holding the model keys
	// (created through occ, agents_test.go): KeyGood (the fake accepts it),
	// KeyBad (it answers 401) and KeyUpfrontOnly (the upfront check's empty
	// request passes, every model turn is refused 401).
	ModelSecret    = "model-keys"
	KeyGood        = "good"
	KeyBad         = "bad"
	KeyUpfrontOnly = "upfront-only"
	// InstallTimeout bounds the installation (image imports, the bundle,
	// three members joined).
	InstallTimeout = 10 * time.Minute
	// coordinatorReplicas is the bundle's StatefulSet size.
	coordinatorReplicas = 3
)

// install is oce as installed on the cluster.
type install struct {
	images  map[string]imagestest.Image
	dir     string // the overlay, the CA file
	caFile  string
	token   string
	goodKey string
	steps   []k8stest.Timing // installation phases
	timings []k8stest.Timing // everything before the tests, for the report
}

// step records a phase that ends now.
func (in *install) step(phase string, since *time.Time) {
	now := time.Now()
	in.steps = append(in.steps, k8stest.Timing{Phase: phase, Duration: now.Sub(*since)})
	*since = now
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// installOCE does what docs/kubernetes.md "Install" tells a platform
// engineer: import the images, create the namespace with the token and TLS
// Secrets, point an overlay of the bundle at the images and the driver
// configuration, apply it server-side, and wait until the three members
// formed one cluster. The fake provider goes in first, as its own Service.
func installOCE(ctx context.Context, c *k8stest.Cluster, imgs map[string]imagestest.Image) (*install, error) {
	dir, err := os.MkdirTemp(c.Dir, "oce-install-")
	if err != nil {
		return nil, err
	}
	in := &install{images: imgs, dir: dir, token: randomHex(32), goodKey: "sk-e2e-" + randomHex(16)}
	oce = in // occ (waitMembers) needs the CA and token
	at := time.Now()
	if err := in.importImages(ctx, c); err != nil {
		return nil, err
	}
	in.step("import the images into containerd", &at)
	if err := in.secrets(ctx, c); err != nil {
		return nil, err
	}
	if err := in.fakeProvider(ctx, c); err != nil {
		return nil, err
	}
	if err := in.applyBundle(ctx, c); err != nil {
		return nil, err
	}
	in.step("secrets, fake provider, apply the bundle", &at)
	if err := in.waitMembers(ctx); err != nil {
		return nil, err
	}
	in.step("three coordinator members Ready, one cluster", &at)
	return in, nil
}

// importImages imports the three images and the fake provider's into the
// node's containerd, concurrently, and checks each is named as built.
func (in *install) importImages(ctx context.Context, c *k8stest.Cluster) error {
	fake, err := in.fakeproviderArchive(ctx)
	if err != nil {
		return err
	}
	want := map[string]string{fake: FakeproviderImage}
	for _, img := range in.images {
		want[img.Archive] = img.Ref
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for archive, ref := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names, err := c.ImportImage(ctx, archive)
			if err == nil && (len(names) != 1 || names[0] != ref) {
				err = fmt.Errorf("kube: %s imported as %v, not %s", filepath.Base(archive), names, ref)
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fakeproviderArchive builds cmd/fakeprovider (static) into a FROM-scratch
// image: the fake is test infrastructure, so it stays out of the product
// images and costs no image rebuild.
func (in *install) fakeproviderArchive(ctx context.Context) (string, error) {
	root, err := k8stest.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(in.dir, "fakeprovider")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/fakeprovider")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kube: build fakeprovider: %w: %s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	archive := filepath.Join(in.dir, "fakeprovider.oci.tar")
	return archive, k8stest.WriteOCIArchive(archive, k8stest.Image{Name: FakeproviderImage,
		Files: map[string]k8stest.ImageFile{"/fakeprovider": {Mode: 0o755, Data: data}}, Entrypoint: []string{"/fakeprovider"},
		User: "1000:1000"})
}

// secrets creates the bundle's namespace with the token and TLS Secrets
// (install step 3). The certificate is what `coordinator certs` writes:
// certs.NewInstall names every address the install doc dials, the
// port-forward's 127.0.0.1 among them (TestInstallDocConnectStep). The
// model keys are a credential source of the team Namespace, created through
// occ (agents_test.go).
func (in *install) secrets(ctx context.Context, c *k8stest.Cluster) error {
	tlsMaterial, err := certs.NewInstall(SystemNS, nil, time.Now())
	if err != nil {
		return err
	}
	in.caFile = filepath.Join(in.dir, certs.InstallCAFile)
	if err := os.WriteFile(in.caFile, tlsMaterial.CACert, 0o600); err != nil {
		return err
	}
	cs := c.Client.CoreV1()
	if _, err := cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "oce-coordinator-token", Namespace: SystemNS}, Data: map[string][]byte{"token": []byte(in.token)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "oce-coordinator-tls", Namespace: SystemNS}, Data: map[string][]byte{
			certs.InstallCAFile: tlsMaterial.CACert, certs.InstallCertFile: tlsMaterial.Cert, certs.InstallKeyFile: tlsMaterial.Key}},
	} {
		if _, err := cs.Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kube: secret %s: %w", s.Name, err)
		}
	}
	return nil
}

// modelKeys are the values of the team's credential source ModelSecret.
func modelKeys() map[string]string {
	return map[string]string{KeyGood: oce.goodKey, KeyBad: "sk-e2e-not-accepted",
		KeyUpfrontOnly: fakeprovider.UpfrontOnlyKeyPrefix + "kube-e2e"}
}

func ptr[T any](v T) *T { return &v }

// fakeProvider runs cmd/fakeprovider as the Service ProviderURL names: every
// address of its Pod, the good key accepted (from a Secret volume), one log
// record per request (the tests count them).
func (in *install) fakeProvider(ctx context.Context, c *k8stest.Cluster) error {
	cs := c.Client.CoreV1()
	if _, err := cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ProviderNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.Secrets(ProviderNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys"},
		Data: map[string][]byte{"keys": []byte(in.goodKey + "\n")}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": "fake-provider"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fake-provider", Namespace: ProviderNS},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				EnableServiceLinks: ptr(false), AutomountServiceAccountToken: ptr(false),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000)),
					RunAsGroup: ptr(int64(1000)), FSGroup: ptr(int64(1000))},
				Containers: []corev1.Container{{
					Name: "fake-provider", Image: FakeproviderImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"--addr", "0.0.0.0:8080", "--non-loopback", "--reply", FakeReply,
						"--valid-key-file", "/var/run/keys/keys"},
					Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}, PeriodSeconds: 1},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "keys", MountPath: "/var/run/keys", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "keys", DefaultMode: ptr(int32(0o400))}}}},
			}}},
	}
	if _, err := c.Client.AppsV1().Deployments(ProviderNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := cs.Services(ProviderNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "fake-provider"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}}}},
		metav1.CreateOptions{})
	return err
}

// overlay is the kustomization the tests apply: the bundle, its
// coordinator image set to the one built, and the driver configuration
// (images, the fake provider's Service as the model endpoint, the model
// egress allowed to it — the Pod network on its port — and the credential
// namespace of the model keys). The
// activation order is the bundle's default (before-cutover): the tests
// exercise the installation operators get; a key only a model turn refuses
// is what reaches a held Pod.
func (in *install) overlay() (string, error) {
	root, err := k8stest.RepoRoot()
	if err != nil {
		return "", err
	}
	base, err := filepath.Rel(in.dir, filepath.Join(root, "images", "deploy"))
	if err != nil {
		return "", err
	}
	coord := in.images[imagestest.Coordinator].Ref
	name, tag, _ := strings.Cut(coord, ":")
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: localhost/oce/coordinator
    newName: %s
    newTag: %q
patches:
  - patch: |-
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: oce-coordinator-driver, namespace: %s}
      data:
        OCE_GATEWAY_IMAGE: %q
        OCE_HARNESS_IMAGE: %q
        OCE_MODEL_PROVIDER_BASE_URL_OPENAI: %q
        OCE_MODEL_PROVIDER_BASE_URL_ANTHROPIC: %q
        OCE_MODEL_EGRESS: %q
`, base, name, tag, SystemNS, in.images[imagestest.Gateway].Ref, in.images[imagestest.Harness].Ref, ProviderURL, ProviderURL,
		k8stest.PodSubnet+":8080")
	return in.dir, os.WriteFile(filepath.Join(in.dir, "kustomization.yaml"), []byte(k), 0o600)
}

// applyBundle applies the overlay server-side, as install step 4 says.
func (in *install) applyBundle(ctx context.Context, c *k8stest.Cluster) error {
	dir, err := in.overlay()
	if err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=oce-install", "-k", dir); err != nil {
		return fmt.Errorf("kube: apply the bundle: %w\n%s", err, out)
	}
	return nil
}

// waitMembers waits for the three coordinator Pods to be Ready and occ to
// see three voters with one leader.
func (in *install) waitMembers(ctx context.Context) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		c, err := clusterView(ctx)
		if err == nil && len(c.Members) == coordinatorReplicas && c.LeaderID != "" && readyCoordinators(ctx) == coordinatorReplicas {
			voters := 0
			for _, m := range c.Members {
				if m.Suffrage == "voter" {
					voters++
				}
			}
			if voters == coordinatorReplicas {
				return nil
			}
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube: three coordinator members never formed one cluster (last: %s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

// readyCoordinators counts the coordinator Pods kubelet reports Ready.
func readyCoordinators(ctx context.Context) int {
	l, err := cluster.Client.CoreV1().Pods(SystemNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=oce-coordinator"})
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// dumpState is what a failed run prints: every Pod, the Events, and the
// coordinators' and fake provider's logs (tails).
func dumpState(ctx context.Context) string {
	if cluster == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var b bytes.Buffer
	out, err := cluster.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	fmt.Fprintf(&b, "--- pods (%v)\n%s", err, out)
	out, err = cluster.Kubectl(ctx, "get", "events", "-A", "--sort-by=.lastTimestamp")
	fmt.Fprintf(&b, "--- events (%v)\n%s", err, tail(out, 6000))
	for _, ns := range []string{SystemNS, ProviderNS} {
		l, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || err != nil {
			continue
		}
		for _, p := range l.Items {
			for _, ctr := range p.Spec.Containers {
				logs, err := cluster.Logs(ctx, ns, p.Name, ctr.Name, false)
				fmt.Fprintf(&b, "--- %s/%s %s (%v)\n%s\n", ns, p.Name, ctr.Name, err, tail(logs, 4000))
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 { // why the last instance ended
					logs, err := cluster.Logs(ctx, ns, p.Name, cs.Name, true)
					fmt.Fprintf(&b, "--- %s/%s %s, previous instance (%v; last state %+v)\n%s\n", ns, p.Name, cs.Name, err,
						cs.LastTerminationState.Terminated, tail(logs, 4000))
				}
			}
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
