package occ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// loginCmd records a token file in the current context after checking it,
// or gets an OIDC token with the device grant when no file is given.
func (a *app) loginCmd() *cobra.Command {
	var tokenFile string
	c := &cobra.Command{Use: "login", Short: "Log in: check a token file, or get an OIDC token (device grant), and keep it in the context",
		Args:    cobra.NoArgs,
		Example: "  occ login                       # OIDC device login when the coordinator names an issuer\n  occ login --token-file token",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			out := cmd.OutOrStdout()
			file, err := a.loginTokenFile(ctx, out, tokenFile)
			if err != nil {
				return err
			}
			tok, err := a.readToken(file)
			if err != nil {
				return err
			}
			a.settings.Token = tok
			who, err := a.client().WhoAmI(ctx)
			if err != nil {
				return fmt.Errorf("the coordinator refused the token: %w", err)
			}
			if file == "-" {
				if file, err = a.saveLoginToken(tok); err != nil {
					return err
				}
			}
			if err := a.rememberToken(file); err != nil {
				return err
			}
			fmt.Fprintf(out, "logged in as %s\n", who.Actor)
			return nil
		}}
	c.Flags().StringVar(&tokenFile, "token-file", "", "file holding the token, '-' for stdin (default: an OIDC device login when the coordinator names an issuer)")
	return c
}

// loginTokenFile is the token file login checks: the given one made
// absolute, '-' (stdin) as is, or, when none is given, a file holding the
// token an OIDC device login gets.
func (a *app) loginTokenFile(ctx context.Context, out io.Writer, tokenFile string) (string, error) {
	switch tokenFile {
	case "":
		tok, err := a.deviceLogin(ctx, out)
		if err != nil {
			return "", err
		}
		return a.saveLoginToken(tok)
	case "-":
		return "-", nil
	}
	return filepath.Abs(tokenFile)
}

// saveLoginToken keeps a token occ received in a 0600 file of its own.
func (a *app) saveLoginToken(tok string) (string, error) {
	dir := filepath.Join(filepath.Dir(a.configPath()), "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := first(a.settings.Context, "default")
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(tok+"\n"), 0o600)
}

// rememberToken stores the token file in the current context (making a
// "default" context from the resolved settings when there is none).
func (a *app) rememberToken(tokenFile string) error {
	p := a.configPath()
	fc, err := loadFileConfig(p)
	if err != nil {
		return err
	}
	name := first(a.settings.Context, "default")
	ctx, ok := fc.context(name)
	if !ok {
		fc.Contexts = append(fc.Contexts, Context{Name: name, Server: a.settings.Server, CAFile: absOrEmpty(a.settings.CAFile)})
		ctx = &fc.Contexts[len(fc.Contexts)-1]
	}
	ctx.TokenFile = tokenFile
	if fc.CurrentContext == "" {
		fc.CurrentContext = name
	}
	return saveFileConfig(p, fc)
}

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}

func (a *app) whoamiCmd() *cobra.Command {
	return &cobra.Command{Use: "whoami", Short: "Show who the token authenticates", Args: cobra.NoArgs,
		Example: "  occ whoami\n  occ whoami -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callPrint(a, cmd, (*client.Client).WhoAmI, func(who wire.WhoAmI) table {
				return table{header: []string{"ACTOR", "KIND", "GROUPS"},
					rows: [][]string{{who.Actor, who.Kind, dash(strings.Join(who.Groups, ","))}}}
			})
		}}
}

// deviceLogin gets an ID token from the OIDC issuer the coordinator names,
// with the device authorization grant (RFC 8628): occ shows a URL and a
// code, the user approves in a browser, occ polls for the token.
func (a *app) deviceLogin(ctx context.Context, out io.Writer) (string, error) {
	ac, err := a.client().AuthConfig(ctx)
	if err != nil {
		return "", err
	}
	if ac.OIDC == nil {
		return "", usageError(errors.New("the coordinator names no OIDC issuer: log in with --token-file FILE"))
	}
	hc := http.DefaultClient
	if a.opts.HTTPClient != nil {
		hc = a.opts.HTTPClient
	}
	disc, err := discover(ctx, hc, ac.OIDC.Issuer)
	if err != nil {
		return "", err
	}
	if disc.DeviceAuthURL == "" {
		return "", fmt.Errorf("the issuer %s offers no device authorization endpoint", ac.OIDC.Issuer)
	}
	conf := &oauth2.Config{ClientID: ac.OIDC.Audience, Scopes: []string{"openid", "profile", "email", "groups"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: disc.DeviceAuthURL, TokenURL: disc.TokenURL}}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return "", fmt.Errorf("device authorization: %w", err)
	}
	uri := da.VerificationURIComplete
	if uri == "" {
		uri = da.VerificationURI
	}
	fmt.Fprintf(out, "open %s and enter the code %s\n", uri, da.UserCode)
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return "", fmt.Errorf("device login: %w", err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return "", errors.New("the issuer answered no id_token")
	}
	return id, nil
}

type discovery struct {
	Issuer        string `json:"issuer"`
	TokenURL      string `json:"token_endpoint"`
	DeviceAuthURL string `json:"device_authorization_endpoint"`
}

func discover(ctx context.Context, hc *http.Client, issuer string) (discovery, error) {
	var d discovery
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return d, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return d, fmt.Errorf("OIDC discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("OIDC discovery: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&d); err != nil {
		return d, fmt.Errorf("OIDC discovery: %w", err)
	}
	if d.Issuer != strings.TrimRight(issuer, "/") && d.Issuer != issuer {
		return d, fmt.Errorf("OIDC discovery: the document names issuer %q, not %q", d.Issuer, issuer)
	}
	return d, nil
}
