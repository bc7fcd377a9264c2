package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/authn"
)

// A misconfigured console single sign-on refuses the start with
// NOT_CONFIGURED; a good one yields the exact redirect URI.
func TestConsoleSSOConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(good, []byte("s3cret\n"), 0o600))
	open := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(open, []byte("s3cret\n"), 0o644))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	oidc := authn.OIDCConfig{Issuer: "https://idp.example", Audience: "oce-cli"}
	for _, tc := range []struct {
		name string
		oidc authn.OIDCConfig
		sso  ConsoleSSO
		ok   bool
	}{
		{name: "off", oidc: oidc, ok: true},
		{name: "good", oidc: oidc, sso: ConsoleSSO{ClientID: "oce-console", ClientSecretFile: good, URL: "https://oce.example/"}, ok: true},
		{name: "no issuer", sso: ConsoleSSO{ClientID: "oce-console", ClientSecretFile: good, URL: "https://oce.example"}},
		{name: "no url", oidc: oidc, sso: ConsoleSSO{ClientID: "oce-console", ClientSecretFile: good}},
		{name: "url with a path", oidc: oidc, sso: ConsoleSSO{ClientID: "oce-console", ClientSecretFile: good, URL: "https://oce.example/x"}},
		{name: "secret others may read", oidc: oidc, sso: ConsoleSSO{ClientID: "oce-console", ClientSecretFile: open, URL: "https://oce.example"}},
		{name: "empty secret", oidc: oidc, sso: ConsoleSSO{ClientID: "oce-console", ClientSecretFile: empty, URL: "https://oce.example"}},
		{name: "no secret file", oidc: oidc, sso: ConsoleSSO{ClientID: "oce-console", URL: "https://oce.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &node{cfg: Config{OIDC: tc.oidc, ConsoleSSO: tc.sso}}
			c, err := n.consoleSSO()
			if !tc.ok {
				require.ErrorIs(t, err, ErrConsoleSSOConfig)
				require.Equal(t, CodeNotConfigured, StartCode(err))
				require.NotContains(t, err.Error(), "s3cret")
				return
			}
			require.NoError(t, err)
			if tc.sso.ClientID == "" {
				require.Nil(t, c)
				return
			}
			require.Equal(t, "https://oce.example/console/sso/callback", c.RedirectURL)
			require.Equal(t, "https://oce.example/console/login", c.PostLogoutURL)
			require.Equal(t, "s3cret", c.ClientSecret)
		})
	}
}
