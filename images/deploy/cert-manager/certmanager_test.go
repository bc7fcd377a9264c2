// Package certmanager holds the optional cert-manager objects that issue the
// deploy bundle's Secret oce-coordinator-tls (kubectl apply -k
// images/deploy/cert-manager, where cert-manager runs). Its tests check
// them, and the openssl recipe of docs/OPERATIONS.md, against
// certs.InstallHosts — the names `coordinator certs` issues — so the three
// ways to the certificate name the same addresses. No cert-manager, no
// API server.
package certmanager

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/certs"
)

// namespace is the bundle's (images/deploy/kustomization.yaml).
const namespace = "oce-system"

// wantNames splits certs.InstallHosts(namespace) into DNS names and IP
// addresses, as a certificate holds them.
func wantNames(t *testing.T) (dns, ips []string) {
	t.Helper()
	hosts, err := certs.InstallHosts(namespace)
	require.NoError(t, err)
	for _, h := range hosts {
		if net.ParseIP(h) != nil {
			ips = append(ips, h)
		} else {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		// Certificate
		SecretName  string   `json:"secretName"`
		IsCA        bool     `json:"isCA"`
		DNSNames    []string `json:"dnsNames"`
		IPAddresses []string `json:"ipAddresses"`
		Usages      []string `json:"usages"`
		IssuerRef   struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"issuerRef"`
		// Issuer
		SelfSigned *struct{} `json:"selfSigned"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca"`
	} `json:"spec"`
}

// objects reads every YAML document of the kustomization's resources.
func objects(t *testing.T) map[string]object {
	t.Helper()
	var k struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile("kustomization.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &k))
	require.Equal(t, namespace, k.Namespace, "the bundle's namespace: the names below are its")
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.ElementsMatch(t, append([]string{"kustomization.yaml"}, k.Resources...), files, "every manifest is a resource")
	out := map[string]object{}
	for _, f := range k.Resources {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(b), -1) {
			var o object
			require.NoError(t, yaml.Unmarshal([]byte(doc), &o), "%s", f)
			if o.Kind != "" {
				out[o.Kind+"/"+o.Metadata.Name] = o
			}
		}
	}
	return out
}

// The Certificate behind oce-coordinator-tls names exactly what `coordinator
// certs` does, for server and client auth, from a CA Issuer whose CA is a
// self-signed root (so ca.crt is a CA the members and occ can trust, not
// the leaf).
func TestCertificateNamesTheInstallHosts(t *testing.T) {
	objs := objects(t)
	var leaf *object
	for _, o := range objs {
		if o.Kind == "Certificate" && o.Spec.SecretName == "oce-coordinator-tls" {
			leaf = &o
		}
	}
	require.NotNil(t, leaf, "a Certificate writes the Secret the StatefulSet mounts")
	dns, ips := wantNames(t)
	require.Equal(t, dns, leaf.Spec.DNSNames)
	require.Equal(t, ips, leaf.Spec.IPAddresses)
	require.Subset(t, leaf.Spec.Usages, []string{"server auth", "client auth"})
	require.False(t, leaf.Spec.IsCA)

	issuer, ok := objs[leaf.Spec.IssuerRef.Kind+"/"+leaf.Spec.IssuerRef.Name]
	require.True(t, ok, "the leaf's Issuer is in the kustomization: %+v", leaf.Spec.IssuerRef)
	require.NotNil(t, issuer.Spec.CA, "a CA Issuer")
	var root *object
	for _, o := range objs {
		if o.Kind == "Certificate" && o.Spec.SecretName == issuer.Spec.CA.SecretName {
			root = &o
		}
	}
	require.NotNil(t, root, "a Certificate makes the CA Issuer's Secret")
	require.True(t, root.Spec.IsCA)
	selfSigned, ok := objs[root.Spec.IssuerRef.Kind+"/"+root.Spec.IssuerRef.Name]
	require.True(t, ok)
	require.NotNil(t, selfSigned.Spec.SelfSigned, "the root is self-signed")
}

// The openssl recipe in docs/OPERATIONS.md names exactly the same hosts, in
// the same order.
func TestOpenSSLRecipeNamesTheInstallHosts(t *testing.T) {
	b, err := os.ReadFile("../../../docs/OPERATIONS.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "### Kubernetes: certificates from Secrets")
	require.GreaterOrEqual(t, start, 0)
	section := doc[start:]
	if end := strings.Index(section[4:], "\n### "); end >= 0 {
		section = section[:end+4]
	}
	require.Contains(t, section, "subjectAltName = @names")
	require.Contains(t, section, "extendedKeyUsage = serverAuth, clientAuth")
	names := regexp.MustCompile(`(?m)^\s*(DNS|IP)\.(\d+) = (\S+)$`).FindAllStringSubmatch(section, -1)
	var dns, ips []string
	for _, m := range names {
		if m[1] == "DNS" {
			require.Equal(t, len(dns)+1, mustAtoi(t, m[2]), "DNS entries numbered in order: %s", m[0])
			dns = append(dns, m[3])
		} else {
			require.Equal(t, len(ips)+1, mustAtoi(t, m[2]), "IP entries numbered in order: %s", m[0])
			ips = append(ips, m[3])
		}
	}
	wantDNS, wantIPs := wantNames(t)
	require.Equal(t, wantDNS, dns)
	require.Equal(t, wantIPs, ips)
	require.Contains(t, section, "coordinator certs --namespace oce-system --out", "the Go way is documented too")
	require.Contains(t, section, "images/deploy/cert-manager", "and the cert-manager way")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
