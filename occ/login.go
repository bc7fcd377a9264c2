package occ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"golang.org/x/oauth2"
)

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
