package compute

import (
	"context"

	"oce.dev/oce/coordinator/state"
)

// Credentials resolves a revision's harnessAuth binding to the secret bytes
// a driver delivers to the one workload that owns model access (file name →
// bytes: model-api-key, openai-api-key, codex-access-token). The revision
// freezes only the source reference; values never appear in logs or errors.
type Credentials interface {
	Resolve(ctx context.Context, rev state.Revision) (map[string][]byte, error)
}

// CredentialsFunc adapts a function to Credentials.
type CredentialsFunc func(ctx context.Context, rev state.Revision) (map[string][]byte, error)

// Resolve implements Credentials.
func (f CredentialsFunc) Resolve(ctx context.Context, rev state.Revision) (map[string][]byte, error) {
	return f(ctx, rev)
}
