package client

import (
	"context"
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
)

func credPath(ns, name string) string { return nsPath(ns) + "/credentials/" + esc(name) }

// CreateCredentialSource creates (req.Values) or registers (req.From) a
// credential source of Namespace ns; the answer is its metadata.
func (c *Client) CreateCredentialSource(ctx context.Context, ns string, req wire.CreateCredentialSource) (wire.CredentialSource, error) {
	var out wire.CredentialSource
	err := c.do(ctx, http.MethodPost, nsPath(ns)+"/credentials", nil, req, &out)
	return out, err
}

// CredentialSources lists the credential sources of ns (metadata only).
func (c *Client) CredentialSources(ctx context.Context, ns string) ([]wire.CredentialSource, error) {
	var out wire.List[wire.CredentialSource]
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/credentials", nil, nil, &out)
	return out.Items, err
}

// CredentialSource reads one source's metadata.
func (c *Client) CredentialSource(ctx context.Context, ns, name string) (wire.CredentialSource, error) {
	var out wire.CredentialSource
	err := c.do(ctx, http.MethodGet, credPath(ns, name), nil, nil, &out)
	return out, err
}

// RotateCredentialSource writes the source's next version.
func (c *Client) RotateCredentialSource(ctx context.Context, ns, name string, req wire.RotateCredentialSource) (wire.CredentialSource, error) {
	var out wire.CredentialSource
	err := c.do(ctx, http.MethodPost, credPath(ns, name)+"/rotate", nil, req, &out)
	return out, err
}

// WithdrawCredentialSource deletes the source's value and metadata.
func (c *Client) WithdrawCredentialSource(ctx context.Context, ns, name string) (wire.CredentialSource, error) {
	var out wire.CredentialSource
	err := c.do(ctx, http.MethodDelete, credPath(ns, name), nil, nil, &out)
	return out, err
}
