// Package sso_test signs in to the console through a real OpenID provider
// in headless Chromium: the provider scripts/oidc-provider builds (the
// OpenID-certified zitadel/oidc op package; installed by its build.sh,
// which this test runs when the cached build is missing), a coordinator
// with the console's single sign-on, all on 127.0.0.1.
package sso_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/internal/browser"
	"oce.dev/oce/internal/oidctest"
	"oce.dev/oce/shared/logtest"
)

const (
	clientID = "oce-console"
	// revalidateInTest is the console's revalidation interval here: a
	// disabled account's session must end within it (plus a page load).
	revalidateInTest = 3 * time.Second
	password         = "alice-password-planted-51c2"
)

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		require.NotEqual(t, dir, filepath.Dir(dir), "go.mod not found")
		dir = filepath.Dir(dir)
	}
}

// providerBinary runs build.sh (a no-op when the cached build matches) and
// returns the provider's path: a missing provider is built, never skipped.
type user struct {
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
	Disabled bool     `json:"disabled"`
}

// startProvider runs the provider with one client and the users file, and
// returns its issuer URL.
func startProvider(t *testing.T, dir, secret, consoleURL string, logs *logtest.Buffer) string {
	cfg := filepath.Join(dir, "provider.json")
	oidctest.WriteJSON(t, cfg, map[string]any{
		"clients": []map[string]any{{"id": clientID, "secret": secret,
			"redirectURIs":           []string{consoleURL + "/console/sso/callback"},
			"postLogoutRedirectURIs": []string{consoleURL + "/console/login"}}},
		"usersFile": filepath.Join(dir, "users.json"),
	})
	cmd := exec.Command(oidctest.Binary(t, moduleRoot(t)), "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Stderr = logs
	return oidctest.Start(t, cmd, logs)
}

// api calls the coordinator API with the bootstrap token.
func api(t *testing.T, base, token, method, path, body string) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	require.Less(t, res.StatusCode, 300, "%s %s: %s", method, path, b)
}

func TestConsoleSSO(t *testing.T) {
	dir := t.TempDir()
	secret := "client-secret-planted-" + fmt.Sprint(time.Now().UnixNano())
	var coordLogs, providerLogs logtest.Buffer

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()

	users := filepath.Join(dir, "users.json")
	oidctest.WriteJSON(t, users, map[string]user{"alice": {Password: password, Groups: []string{"ops"}}})
	issuer := startProvider(t, dir, secret, base, &providerLogs)
	secretFile := filepath.Join(dir, "console-client-secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret+"\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	data := filepath.Join(dir, "data")
	cfg := server.Config{DataDir: data, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Listeners: []net.Listener{ln},
		Driver: memory.New(memory.DefaultCapabilities()), Insecure: true,
		Log: slog.New(slog.NewJSONHandler(&coordLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	cfg.OIDC.Issuer, cfg.OIDC.Audience = issuer, "oce-cli"
	cfg.ConsoleSSO = server.ConsoleSSO{ClientID: clientID, ClientSecretFile: secretFile, URL: base, Name: "Test IdP",
		Revalidate: revalidateInTest}
	go func() { done <- server.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		// secrets never reach a log
		for name, logs := range map[string]string{"coordinator": coordLogs.String(), "provider": providerLogs.String()} {
			require.NotContains(t, logs, secret, "the client secret in the %s log", name)
			require.NotContains(t, logs, password, "alice's password in the %s log", name)
		}
	})
	var token string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(data, server.TokenFileName))
		if err != nil {
			return false
		}
		token = strings.TrimSpace(string(b))
		res, err := http.Get(base + "/v1/whoami")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusUnauthorized
	}, time.Minute, 50*time.Millisecond, "the coordinator did not serve")
	for _, ns := range []string{"team", "other"} {
		require.Eventually(t, func() bool {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/namespaces", strings.NewReader(`{"name":"`+ns+`"}`))
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode < 300
		}, time.Minute, 100*time.Millisecond, "no leader")
	}
	// the group's role binding: viewer of team
	api(t, base, token, http.MethodPost, "/v1/rolebindings", `{"role":"viewer","namespace":"team","subject":{"kind":"group","name":"oidc:ops"}}`)

	b, err := browser.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(b.Close)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			html, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			loc, _ := chromedp.Run(b.Ctx, chromedp.Location())
			t.Fatalf("browser: %v at %s\n%s", err, loc, html)
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
	signIn := func() {
		t.Helper()
		run(chromedp.Navigate(base+"/console/login"), chromedp.WaitVisible(chromedp.ID("sso-start")),
			chromedp.Click(chromedp.ID("sso-start")),
			// the provider's own login form
			chromedp.WaitVisible(chromedp.ID("username")),
			chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
			chromedp.Click(chromedp.ID("submit")),
			chromedp.WaitVisible(chromedp.ID("namespaces")))
		require.Equal(t, "user:oidc:alice", text("#user"))
	}

	signIn()
	// the group's role: team's Agents may be viewed, an Agent not created
	run(chromedp.Navigate(base+"/console/ns/team"), chromedp.WaitVisible(chromedp.ID("agents")))
	run(chromedp.Navigate(base+"/console/ns/team/new"), chromedp.WaitVisible(chromedp.ID("error-code")))
	require.Equal(t, "FORBIDDEN", text("#error-code"))

	// logout goes through the provider's end_session back to the login page
	run(chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("logout")), chromedp.Click(chromedp.ID("logout")),
		chromedp.WaitVisible(chromedp.ID("login-form")))
	run(chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("login-form")))

	// signed in again, then the account is disabled at the provider: the
	// session ends within the revalidation interval
	signIn()
	oidctest.WriteJSON(t, users, map[string]user{"alice": {Password: password, Groups: []string{"ops"}, Disabled: true}})
	disabled := time.Now()
	// The console revalidates on a request, so the test's own page loads
	// are what end the session: one every 250 ms until it ends, or fail.
	var ended time.Duration
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	outlived := time.After(revalidateInTest + 10*time.Second)
	for ended == 0 {
		run(chromedp.Navigate(base + "/console/"))
		loc, err := chromedp.Run(b.Ctx, chromedp.Location())
		require.NoError(t, err)
		if strings.Contains(loc, "/console/login?ended=SSO_SESSION_ENDED") {
			ended = time.Since(disabled)
			break
		}
		select {
		case <-tick.C:
		case <-outlived:
			require.Fail(t, "the session outlived the disabled account", "still signed in %v after", time.Since(disabled))
		}
	}
	t.Logf("session ended %v after the account was disabled (interval %v)", ended.Round(time.Millisecond), revalidateInTest)
	require.LessOrEqual(t, ended, revalidateInTest+2*time.Second)
	require.Contains(t, text("#login-error"), "SSO_SESSION_ENDED")

	// the disabled account cannot sign in again
	run(chromedp.Click(chromedp.ID("sso-start")), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("submit")), chromedp.WaitVisible(chromedp.ID("error")))
	require.Contains(t, text("#error"), "disabled")

	// break-glass: the token login still works
	run(chromedp.Navigate(base+"/console/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("login-form")),
		chromedp.WaitVisible(chromedp.ID("namespaces")))
	require.Equal(t, "bootstrap", text("#user"))
}
