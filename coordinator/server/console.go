package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/console"
	"oce.dev/oce/shared/secretfile"
)

// ConsoleSSO configures the console's single sign-on through the
// coordinator's OIDC issuer (Config.OIDC): a confidential client of the
// provider whose secret is read from a file, never from flags or the
// environment.
type ConsoleSSO struct {
	// ClientID is the console's client at the provider; empty turns single
	// sign-on off. The API then also accepts ID tokens with this audience.
	ClientID string
	// ClientSecretFile holds the client secret (secret file rule: 0600).
	ClientSecretFile string
	// URL is the console's external base URL (https://oce.example.com):
	// the provider's redirect URI is URL + /console/sso/callback exactly,
	// and its post-logout redirect URL + /console/login.
	URL string
	// Name is the provider's name on the login page.
	Name string
	// Revalidate overrides console.RevalidateInterval (tests).
	Revalidate time.Duration
}

// ErrConsoleSSOConfig: the console's single sign-on is misconfigured.
var ErrConsoleSSOConfig = errors.New("server: bad console single sign-on configuration")

// consoleSSO builds the console's SSO configuration; nil when it is off.
func (n *node) consoleSSO() (*console.SSOConfig, error) {
	c := n.cfg.ConsoleSSO
	if c.ClientID == "" {
		return nil, nil
	}
	if n.cfg.OIDC.Issuer == "" {
		return nil, fmt.Errorf("%w: --console-oidc-client-id needs --oidc-issuer", ErrConsoleSSOConfig)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: --console-url must be the console's base URL, like https://oce.example.com", ErrConsoleSSOConfig)
	}
	secret, err := secretfile.Read(c.ClientSecretFile)
	if err != nil || secret == "" {
		return nil, fmt.Errorf("%w: --console-oidc-client-secret-file: %w", ErrConsoleSSOConfig, errors.Join(err, errEmpty(secret)))
	}
	oc := n.cfg.OIDC
	oc.Audience, oc.ExtraAudiences = c.ClientID, nil
	v, err := authn.NewOIDC(oc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConsoleSSOConfig, err)
	}
	base := strings.TrimSuffix(c.URL, "/")
	return &console.SSOConfig{Name: c.Name, Issuer: oc.Issuer, ClientID: c.ClientID, ClientSecret: secret,
		RedirectURL: base + console.Prefix + "/sso/callback", PostLogoutURL: base + console.Prefix + "/login",
		Verifier: v, HTTPClient: v.HTTPClient(), Revalidate: c.Revalidate}, nil
}

func errEmpty(s string) error {
	if s == "" {
		return errors.New("the file is empty")
	}
	return nil
}

// withConsole serves the web console under /console beside the API, on the
// same listeners and TLS: the console calls the API in process with each
// user's token, so the API's authenticator and IAM decide every request —
// and, asked through GET …/access, what each page offers.
func withConsole(apiH http.Handler, log *slog.Logger, sso func() (*console.SSOConfig, error)) (http.Handler, error) {
	ssoCfg, err := sso()
	if err != nil {
		return nil, err
	}
	c, err := console.New(console.Config{API: apiH, Log: log.With("component", "console"), SSO: ssoCfg})
	if err != nil {
		// the templates are embedded and tested: this is a build defect
		log.Error("console disabled", "error", err.Error())
		return apiH, nil
	}
	return console.Mount(apiH, c), nil
}
