package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/internal/browser"
	"oce.dev/oce/internal/oidctest"
	"oce.dev/oce/shared/logtest"
)

// HelmSSONS is where TestHelmConsoleSSO installs the chart (a namespace of
// its own, as HelmNS: the suite's installation holds oce-system).
const HelmSSONS = "oce-helm-sso"

// The provider's account the test signs in with; its group ops is the one
// the doc's block binds to a role.
const (
	ssoUser     = "alice"
	ssoGroup    = "ops"
	ssoPassword = "alice-password-planted-7e1d"
	// exampleIssuer is the doc's issuer, replaced by the real provider's.
	exampleIssuer = "https://sso.example.com/realms/oce"
)

// docBlock returns the first ```lang block after marker in
// docs/kubernetes.md, its fence's indentation removed from every line.
func docBlock(t *testing.T, marker, lang string) string {
	t.Helper()
	root, err := k8stest.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, marker)
	require.GreaterOrEqual(t, start, 0, "docs/kubernetes.md has %q", marker)
	rest := doc[start:]
	open := strings.Index(rest, "```"+lang+"\n")
	require.GreaterOrEqual(t, open, 0, "a %s block after %q", lang, marker)
	indent := open - (strings.LastIndex(rest[:open], "\n") + 1)
	body := rest[open+len("```"+lang+"\n"):]
	body = body[:strings.Index(body, "```")]
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(body, " \n"), "\n") {
		if len(line) >= indent && strings.TrimSpace(line[:indent]) == "" {
			line = line[indent:]
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}

// providerTLS writes a CA (caFile, what the doc's oce-oidc-ca Secret is
// made from) and the provider's certificate for the node's address, and
// returns the leaf's SPKI hash for Chromium's pin.
func providerTLS(t *testing.T, caFile, certFile, keyFile string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oce e2e OIDC CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafTpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: k8stest.NodeIP},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP(k8stest.NodeIP)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(path, typ string, der []byte, mode os.FileMode) {
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode))
	}
	write(caFile, "CERTIFICATE", caDER, 0o644)
	write(certFile, "CERTIFICATE", leafDER, 0o644)
	write(keyFile, "EC PRIVATE KEY", keyDER, 0o600)
	leaf, err := x509.ParseCertificate(leafDER)
	require.NoError(t, err)
	return spki(leaf)
}

// spki is a certificate's public key hash as Chromium's
// --ignore-certificate-errors-spki-list takes it: the browser accepts
// exactly these keys (the test's provider, the chart's generated
// certificate) without a CA store.
func spki(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// startSSOProvider runs scripts/oidc-provider inside the node's network
// namespace on the node's address, serving HTTPS, with the console's
// client and one user; it returns the issuer URL. The coordinator Pods
// reach that address directly; the browser through the test's proxy.
func startSSOProvider(t *testing.T, dir, secret, consoleURL, certFile, keyFile string, logs *logtest.Buffer) string {
	t.Helper()
	users := filepath.Join(dir, "users.json")
	oidctest.WriteJSON(t, users, map[string]any{ssoUser: map[string]any{"password": ssoPassword, "groups": []string{ssoGroup}}})
	cfg := filepath.Join(dir, "provider.json")
	oidctest.WriteJSON(t, cfg, map[string]any{
		"clients": []map[string]any{{"id": "oce-console", "secret": secret,
			"redirectURIs":           []string{consoleURL + "/console/sso/callback"},
			"postLogoutRedirectURIs": []string{consoleURL + "/console/login"}}},
		"usersFile": users,
	})
	root, err := k8stest.RepoRoot()
	require.NoError(t, err)
	cmd := cluster.Command(context.Background(), oidctest.Binary(t, root), "--config", cfg, "--listen", k8stest.NodeIP+":0",
		"--tls-cert", certFile, "--tls-key", keyFile)
	cmd.Stderr = logs
	issuer := oidctest.Start(t, cmd, logs)
	require.True(t, strings.HasPrefix(issuer, "https://"+k8stest.NodeIP+":"), issuer)
	return issuer
}

// connectProxy is the browser's HTTP proxy: it answers CONNECT by dialing
// the target inside the node's network namespace, where the doc's
// port-forward (127.0.0.1:8443 there) and the provider (the node's
// address) listen; neither exists on the host. It counts the tunnels and
// the bytes the browser sent per target (a tunnel is reused for many
// requests).
type connectProxy struct {
	mu      sync.Mutex
	tunnels map[string]int
	sent    map[string]int64
}

// countingWriter adds what passes through to the proxy's count for host.
type countingWriter struct {
	p    *connectProxy
	host string
	w    io.Writer
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.p.mu.Lock()
	c.p.sent[c.host] += int64(n)
	c.p.mu.Unlock()
	return n, err
}

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	up, err := cluster.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.mu.Lock()
	p.tunnels[r.Host]++
	p.mu.Unlock()
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	c, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(countingWriter{p, r.Host, up}, buf)
		_ = up.Close()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	_ = up.Close()
	<-done
}

func (p *connectProxy) count(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tunnels[host]
}

func (p *connectProxy) bytesSent(host string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[host]
}

// docs/kubernetes.md "Install with Helm" and then "Console single
// sign-on", followed line by line on the real node with a real OpenID
// provider (scripts/oidc-provider, HTTPS, inside the node's network
// namespace on the node's address): the install ends with `occ status`;
// the SSO block creates the client-secret and CA Secrets from files, rolls
// the member with the doc's values (the issuer replaced by the provider's),
// starts the port-forward again, answers `occ status` and binds the
// provider's group ops to viewer of Namespace team. Then headless
// Chromium (on the host, through a proxy that dials into the node's
// namespace) opens the console at the doc's console.url: the login page
// offers the provider, the user alice (group ops) signs in at the
// provider, the console shows user:oidc:alice with the group's role
// (team viewable, creating an Agent FORBIDDEN), and logout ends the
// session. Neither the client secret nor the password reaches the
// StatefulSet or the coordinator's log.
func TestHelmConsoleSSO(t *testing.T) {
	h := newHelmRun(t, HelmSSONS)
	t.Cleanup(func() { // leave the cluster as the suite had it
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// the doc's Namespace and its binding, so the driver's namespaces go too
		out, code := h.helmAPI(ctx, "-n", "team", "-o", "json", "rolebinding", "list")
		var bindings []wire.RoleBinding
		if code != 0 || json.Unmarshal([]byte(out), &bindings) != nil {
			var wrapped struct{ Items []wire.RoleBinding }
			_ = json.Unmarshal([]byte(out), &wrapped)
			bindings = wrapped.Items
		}
		for _, rb := range bindings {
			if rb.Namespace == "team" {
				if out, code := h.helmAPI(ctx, "rolebinding", "delete", rb.ID); code != 0 {
					t.Logf("occ rolebinding delete: %s", out)
				}
			}
		}
		if out, code := h.helmAPI(ctx, "namespace", "delete", "team"); code != 0 {
			t.Logf("occ namespace delete team: %s", out)
		}
		_, _ = h.sh(ctx, "helm uninstall oce --namespace "+HelmSSONS+" --wait --ignore-not-found")
		_, _ = h.sh(ctx, "kubectl delete namespace "+HelmSSONS+" --ignore-not-found --wait=true")
		_, _ = h.sh(ctx, "kubectl delete clusterrolebinding oce-coordinator-driver-"+HelmSSONS+" --ignore-not-found")
	})

	// the doc's values and what the provider is registered with
	ssoYAML := docBlock(t, "## Console single sign-on", "yaml")
	require.Contains(t, ssoYAML, exampleIssuer, "the doc's values name the example issuer")
	var vals struct {
		OIDC struct {
			CASecret string `json:"caSecret"`
		} `json:"oidc"`
		Console struct {
			URL string `json:"url"`
			SSO struct {
				ClientID           string `json:"clientID"`
				ClientSecretSecret string `json:"clientSecretSecret"`
				Name               string `json:"name"`
			} `json:"sso"`
		} `json:"console"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(ssoYAML), &vals), ssoYAML)
	consoleURL := strings.TrimSuffix(vals.Console.URL, "/")
	require.Equal(t, "oce-console", vals.Console.SSO.ClientID, "the client the provider registers")
	require.NotEmpty(t, vals.Console.SSO.Name)
	require.NotEmpty(t, vals.OIDC.CASecret, "the provider's certificate is from the test's CA")

	// the provider, HTTPS on the node's address
	pdir, err := os.MkdirTemp(cluster.Dir, "oidc-")
	require.NoError(t, err)
	secret := "client-secret-planted-" + fmt.Sprint(time.Now().UnixNano())
	caFile := filepath.Join(h.dir, "oidc-ca.crt") // the doc's --from-file=ca.crt=oidc-ca.crt
	certFile, keyFile := filepath.Join(pdir, "tls.crt"), filepath.Join(pdir, "tls.key")
	providerPin := providerTLS(t, caFile, certFile, keyFile)
	var providerLogs logtest.Buffer
	issuer := startSSOProvider(t, pdir, secret, consoleURL, certFile, keyFile, &providerLogs)
	// the doc's client-secret file, written as the doc says (0600)
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "client-secret"), []byte(secret+"\n"), 0o600))

	// Install with Helm, one member (the roll below replaces it)
	helmValues(t, h.dir)
	values := filepath.Join(h.dir, "values.yaml")
	appendFile(t, values, "replicas: 1\n")
	start := time.Now()
	outputs := h.follow(helmDocBlock(t, "## Install with Helm"))
	figure(t, "helm install, 1 member (doc steps) to occ status", time.Since(start))
	require.Contains(t, outputs["status"], "Cluster:", "occ status answered through the port-forward")

	// Console single sign-on: the doc's values, then its block
	appendFile(t, values, strings.ReplaceAll(ssoYAML, exampleIssuer, issuer))
	h.stopPortForwards() // the doc's block starts it again: the roll replaces its Pod
	start = time.Now()
	outputs = h.follow(helmDocBlock(t, "## Console single sign-on"))
	figure(t, "console SSO: secrets, helm upgrade (1 member), occ status", time.Since(start))
	require.Contains(t, outputs["status"], "Cluster:", "occ status after the roll")
	sts := h.statefulSet(t)
	spec, err := json.Marshal(sts.Spec)
	require.NoError(t, err)
	require.Contains(t, string(spec), "OCE_CONSOLE_OIDC_CLIENT_SECRET_FILE", "the roll applied the SSO values")
	require.NotContains(t, string(spec), secret, "the client secret is a file, never in the StatefulSet")

	// the browser's proxy, and the two certificates it accepts
	proxy := &connectProxy{tunnels: map[string]int{}, sent: map[string]int64{}}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	tlsSecret, err := cluster.Client.CoreV1().Secrets(HelmSSONS).Get(t.Context(), "oce-coordinator-tls", metav1.GetOptions{})
	require.NoError(t, err)
	block, _ := pem.Decode(tlsSecret.Data["tls.crt"])
	require.NotNil(t, block, "the chart's certificate")
	coordCert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	cu, err := url.Parse(consoleURL)
	require.NoError(t, err)
	require.Equal(t, "https", cu.Scheme)
	require.NoError(t, coordCert.VerifyHostname(cu.Hostname()), "the chart's certificate names the console URL's host, as the doc says")
	b, err := browser.Start(context.Background(),
		chromedp.Flag("proxy-server", ps.URL),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"), // 127.0.0.1 is the node's, through the proxy too
		chromedp.Flag("ignore-certificate-errors-spki-list", spki(coordCert)+","+providerPin))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(b.Ctx, time.Minute)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			html, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			loc, _ := chromedp.Run(b.Ctx, chromedp.Location())
			t.Fatalf("browser: %v at %s\n%s\nprovider log:\n%s", err, loc, html, providerLogs.String())
		}
	}
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return strings.TrimSpace(s)
	}

	// the login page offers the provider
	start = time.Now()
	run(chromedp.Navigate(consoleURL+"/console/login"), chromedp.WaitVisible(chromedp.ID("sso-start")))
	require.Equal(t, "Sign in with "+vals.Console.SSO.Name, text("#sso-start"))
	// the provider's own login form, then back to the console signed in
	run(chromedp.Click(chromedp.ID("sso-start")),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), ssoUser), chromedp.SendKeys(chromedp.ID("password"), ssoPassword),
		chromedp.Click(chromedp.ID("submit")),
		chromedp.WaitVisible(chromedp.ID("namespaces")))
	figure(t, "console SSO sign-in through the provider", time.Since(start))
	loc, err := chromedp.Run(b.Ctx, chromedp.Location())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(loc, consoleURL+"/console"), "back on the console: %s", loc)
	require.Equal(t, "user:oidc:"+ssoUser, text("#user"), "the console shows the provider's user")
	providerHost := strings.TrimPrefix(issuer, "https://")
	require.Positive(t, proxy.count(providerHost), "the browser went to the provider")
	require.Positive(t, proxy.count(cu.Host), "and to the console through the port-forward")

	// the group's role binding: team viewable, an Agent not creatable
	run(chromedp.Navigate(consoleURL+"/console/ns/team"), chromedp.WaitVisible(chromedp.ID("agents")))
	run(chromedp.Navigate(consoleURL+"/console/ns/team/new"), chromedp.WaitVisible(chromedp.ID("error-code")))
	require.Equal(t, "FORBIDDEN", text("#error-code"))

	// logout goes through the provider's end_session back to the login page,
	// and the session is gone
	before := proxy.bytesSent(providerHost)
	run(chromedp.Navigate(consoleURL+"/console/"), chromedp.WaitVisible(chromedp.ID("logout")), chromedp.Click(chromedp.ID("logout")),
		chromedp.WaitVisible(chromedp.ID("login-form")))
	require.Greater(t, proxy.bytesSent(providerHost), before, "logout went through the provider (its end_session)")
	run(chromedp.Navigate(consoleURL+"/console/"), chromedp.WaitVisible(chromedp.ID("login-form")))
	loc, err = chromedp.Run(b.Ctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, loc, "/console/login", "signed out: the console sends the browser to its login page")

	// secrets never reach a log
	logs, err := cluster.Logs(t.Context(), HelmSSONS, "oce-coordinator-0", "coordinator", false)
	require.NoError(t, err)
	require.NotEmpty(t, logs, "the coordinator's log")
	for name, l := range map[string]string{"coordinator": logs, "provider": providerLogs.String()} {
		require.NotContains(t, l, secret, "the client secret in the %s log", name)
		require.NotContains(t, l, ssoPassword, "alice's password in the %s log", name)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, errors.Join(err, f.Close()))
}
