// Package helm tests the oce chart (images/helm/oce) with the pinned helm:
// `helm lint` and `helm template` golden files for each value set under
// testdata/values (regenerate with `go test ./images/helm -update`), values
// the schema refuses, the generated dev CA, and that the chart renders what
// the kustomize bundle images/deploy applies.
package helm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/images/helm/helmtest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the chart's rendering")

const (
	release = "oce"
	ns      = "oce-system"
)

// namespaceOf is the namespace a value set is rendered in.
func namespaceOf(name string) string {
	if name == "second-install" {
		return "oce-two"
	}
	return ns
}

// helm runs the pinned helm with its own empty config and cache.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := helmtest.Binary(context.Background())
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = helmtest.Env(t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func chart(t *testing.T) string {
	t.Helper()
	dir, err := helmtest.ChartDir()
	require.NoError(t, err)
	return dir
}

// render is `helm template` of the chart with a values file and --set pairs.
func render(t *testing.T, namespace, values string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chart(t), "--namespace", namespace}
	if values != "" {
		args = append(args, "-f", values)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return helm(t, args...)
}

func valueSets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8, "the value sets the chart is rendered with")
	return files
}

// generated are the Secret and ConfigMap values the chart makes at random
// (token, dev CA): masked in golden files, checked by TestGeneratedCA.
var generated = regexp.MustCompile(`(?m)^(  (?:token|ca\.crt|tls\.crt|tls\.key): ).+$`)

// mask replaces generated values in the documents that secrets.yaml renders.
func mask(out string) string {
	docs := strings.Split(out, "\n---\n")
	for i, d := range docs {
		if strings.Contains(d, "# Source: oce/templates/secrets.yaml") {
			docs[i] = generated.ReplaceAllString(d, "${1}GENERATED")
		}
	}
	return strings.Join(docs, "\n---\n")
}

// Every value set lints clean and renders what its golden file holds.
func TestTemplateGolden(t *testing.T) {
	for _, values := range valueSets(t) {
		name := strings.TrimSuffix(filepath.Base(values), ".yaml")
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, "lint", chart(t), "--strict", "--namespace", namespaceOf(name), "-f", values)
			require.NoError(t, err, out)
			require.Contains(t, out, "0 chart(s) failed")

			out, err = render(t, namespaceOf(name), values)
			require.NoError(t, err, out)
			got := mask(out)
			golden := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./images/helm -update")
			require.Equal(t, string(want), got, "the rendering of %s changed; review and run go test ./images/helm -update", values)
		})
	}
}

// The schema refuses values the coordinator or Kubernetes would refuse
// later, before anything is applied, with a message naming the value.
func TestSchemaRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"two replicas", []string{"replicas=2"}, "replicas"},
		{"four replicas", []string{"replicas=4"}, "replicas"},
		{"image without tag or digest", []string{"images.coordinator.tag="}, "images/coordinator"},
		{"malformed digest", []string{"images.gateway.digest=sha256:abc"}, "images/gateway/digest"},
		{"image name with a tag", []string{"images.harness.repository=localhost/oce/harness:1"}, "images/harness/repository"},
		{"unknown TLS mode", []string{"tls.mode=selfsigned"}, "tls/mode"},
		{"OIDC issuer without audience", []string{"oidc.issuer=https://sso.example.com"}, "oidc"},
		{"OIDC issuer over plain HTTP", []string{"oidc.issuer=http://sso.example.com", "oidc.audience=oce"}, "oidc/issuer"},
		{"ingress without host", []string{"ingress.enabled=true"}, "ingress"},
		{"route without parent", []string{"route.enabled=true"}, "route"},
		{"unknown value", []string{"replica=3"}, "replica"},
		{"bad storage size", []string{"storage.size=lots"}, "storage/size"},
		{"cold standby not a boolean", []string{"driver.coldStandby=sometimes"}, "driver/coldStandby"},
		{"console SSO without OIDC issuer", []string{"console.url=https://oce.example.com", "console.sso.clientID=oce-console",
			"console.sso.clientSecretSecret=oce-console-sso"}, "oidc/issuer"},
		{"console SSO without console URL", []string{"oidc.issuer=https://sso.example.com", "oidc.audience=oce",
			"console.sso.clientID=oce-console", "console.sso.clientSecretSecret=oce-console-sso"}, "console/url"},
		{"console SSO without the secret's Secret", []string{"oidc.issuer=https://sso.example.com", "oidc.audience=oce",
			"console.url=https://oce.example.com", "console.sso.clientID=oce-console"}, "console/sso/clientSecretSecret"},
		{"console URL over plain HTTP", []string{"console.url=http://oce.example.com"}, "console/url"},
		{"console URL with a path", []string{"console.url=https://oce.example.com/console"}, "console/url"},
		{"console SSO secret not a Secret name", []string{"console.sso.clientSecretSecret=Not_A_Name"}, "console/sso/clientSecretSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, ns, "", tc.set...)
			require.Error(t, err, "refused: %s", out)
			require.Contains(t, out, "values don't meet the specifications of the schema")
			require.Contains(t, out, tc.want)
		})
	}
}

// object is one rendered Kubernetes object.
type object = map[string]any

// clusterScoped are the cluster-scoped kinds the chart and bundle render
// that kustomize's built-in list lacks.
var clusterScoped = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// objects parses a multi-document YAML stream, keyed kind/namespace/name.
func objects(t *testing.T, stream string) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
		var o object
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o), doc)
		if o == nil {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		if clusterScoped[fmt.Sprint(o["kind"])] {
			// kubectl's kustomize does not know these kinds are cluster-scoped and
			// sets its namespace on them; the API server ignores it.
			delete(md, "namespace")
		}
		key := fmt.Sprintf("%v/%v/%v", o["kind"], md["namespace"], md["name"])
		require.NotContains(t, out, key, "rendered twice")
		out[key] = o
	}
	return out
}

// helmOnly drops what Helm adds and the bundle has not: Helm's labels, and
// the Pod template's checksum annotation (a changed driver configuration
// rolls the members under Helm; kustomize users restart them).
func helmOnly(o object) object {
	md := o["metadata"].(map[string]any)
	if l, ok := md["labels"].(map[string]any); ok {
		for _, k := range []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"} {
			delete(l, k)
		}
	}
	if spec, ok := o["spec"].(map[string]any); ok {
		if tpl, ok := spec["template"].(map[string]any); ok {
			tmd := tpl["metadata"].(map[string]any)
			if a, ok := tmd["annotations"].(map[string]any); ok {
				delete(a, "checksum/driver-config")
				if len(a) == 0 {
					delete(tmd, "annotations")
				}
			}
		}
	}
	return o
}

func kustomize(t *testing.T, dir string) map[string]object {
	t.Helper()
	bin, err := k8stest.Binaries(context.Background())
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	return objects(t, string(out))
}

func keys(m map[string]object) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

// One source of truth: the chart, with the bundle's values, renders exactly
// the objects `kubectl kustomize` builds from images/deploy (but the
// Namespace, which `kubectl create namespace` makes before helm install),
// from images/deploy/cert-manager with tls.mode=certManager, from
// images/deploy/monitoring with monitoring on, and from an overlay adding
// the component images/deploy/console-sso with console single sign-on on — compared as objects, Helm's
// own labels and the checksum annotation aside. A change to either side
// that the other lacks fails here.
func TestChartRendersTheBundle(t *testing.T) {
	root, err := helmtest.RepoRoot()
	require.NoError(t, err)
	deploy := filepath.Join(root, "images", "deploy")
	for _, tc := range []struct {
		name, dir string
		set       []string // on top of testdata/values/bundle.yaml
		kinds     []string // the chart's objects of these kinds (or kind/name) are compared; empty: all
	}{
		{"bundle", deploy, nil, nil},
		{"cert-manager", filepath.Join(deploy, "cert-manager"), []string{"tls.mode=certManager"}, []string{"Issuer", "Certificate"}},
		{"monitoring", filepath.Join(deploy, "monitoring"), []string{"monitoring.serviceMonitor.enabled=true",
			"monitoring.prometheusRule.enabled=true", "monitoring.grafanaDashboard.enabled=true"},
			[]string{"ServiceMonitor", "PrometheusRule", "NetworkPolicy/oce-coordinator-metrics", "ConfigMap/oce-grafana-dashboard"}},
		// an overlay of the bundle with the console-sso component, as
		// docs/kubernetes.md "Console single sign-on" makes one
		{"console-sso", filepath.Join("testdata", "kustomize", "console-sso"), []string{
			"oidc.issuer=https://sso.example.com/realms/oce", "oidc.audience=oce", "console.url=https://oce.example.com",
			"console.sso.clientID=oce-console", "console.sso.clientSecretSecret=oce-console-sso", "console.sso.name=Example SSO"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := kustomize(t, tc.dir)
			delete(want, "Namespace/<nil>/"+ns)
			out, err := render(t, ns, filepath.Join("testdata", "values", "bundle.yaml"), tc.set...)
			require.NoError(t, err, out)
			got := map[string]object{}
			for k, o := range objects(t, out) {
				keep := len(tc.kinds) == 0
				for _, kind := range tc.kinds {
					kindName := strings.SplitN(k, "/", 3)
					keep = keep || kind == kindName[0] || kind == kindName[0]+"/"+kindName[2]
				}
				if keep {
					got[k] = helmOnly(o)
				}
			}
			require.Equal(t, keys(want), keys(got), "the same objects")
			for k := range want {
				require.Equal(t, want[k], got[k], k)
			}
		})
	}
}

// The generated dev CA: the certificate names exactly
// certs.InstallHosts(namespace), serves and authenticates clients (members
// use it both ways), is signed by ca.crt and matches its key; the token is
// 64 characters.
func TestGeneratedCA(t *testing.T) {
	out, err := render(t, ns, "", "tls.extraNames={oce.example.com,10.0.0.10}")
	require.NoError(t, err, out)
	objs := objects(t, out)
	tlsSecret := objs["Secret/"+ns+"/oce-coordinator-tls"]
	require.NotNil(t, tlsSecret, "the generated TLS Secret")
	data := tlsSecret["data"].(map[string]any)
	dec := func(k string) []byte {
		b, err := base64.StdEncoding.DecodeString(data[k].(string))
		require.NoError(t, err, k)
		return b
	}
	block, _ := pem.Decode(dec(certs.InstallCertFile))
	require.NotNil(t, block)
	leaf, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	hosts, err := certs.InstallHosts(ns)
	require.NoError(t, err)
	hosts = append(hosts, "oce.example.com", "10.0.0.10")
	var named []string
	named = append(named, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		named = append(named, ip.String())
	}
	sort.Strings(hosts)
	sort.Strings(named)
	require.Equal(t, hosts, named, "the certificate names what members and clients dial")
	require.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, leaf.ExtKeyUsage)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(dec(certs.InstallCAFile)))
	for _, h := range []string{"oce-coordinator-1.oce-coordinator", "oce-coordinator-api." + ns + ".svc", "127.0.0.1"} {
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, "verified for %s", h)
	}
	_, err = tls.X509KeyPair(dec(certs.InstallCertFile), dec(certs.InstallKeyFile))
	require.NoError(t, err, "the key matches the certificate")
	token := objs["Secret/"+ns+"/oce-coordinator-token"]["data"].(map[string]any)["token"].(string)
	raw, err := base64.StdEncoding.DecodeString(token)
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}$`, string(raw))
}
