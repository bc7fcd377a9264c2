package client

import (
	"context"
	"net/url"
)

type dryRunCtx struct{}

// WithDryRun returns a context whose writes are server-side dry runs
// (?dryRun=server, docs/API.md "Dry runs"): the coordinator validates,
// authorizes and answers them as it would the write, and changes nothing.
// Routes that cannot be dry-run answer INVALID_REQUEST.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunCtx{}, true)
}

// IsDryRun reports whether ctx asks for dry runs (WithDryRun).
func IsDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunCtx{}).(bool)
	return v
}

// dryRunQuery adds the dry-run parameter to a write's query when ctx asks.
func dryRunQuery(ctx context.Context, query url.Values) url.Values {
	if !IsDryRun(ctx) {
		return query
	}
	q := url.Values{}
	for k, v := range query {
		q[k] = append([]string(nil), v...)
	}
	q.Set("dryRun", "server")
	return q
}
