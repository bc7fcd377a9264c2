package server

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/engine"
)

// TestActivationOrder: an unknown activation order is refused before
// anything starts; the before-cutover order (the default) runs an embedded
// replacement's model probe before cutover, the seeds' order does not.
func TestActivationOrder(t *testing.T) {
	err := Run(context.Background(), Config{DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Engine: engine.Config{CredentialCheck: "sed"}, Log: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, engine.ErrCredentialCheck)
	require.True(t, probeBeforeCutover(Config{}))
	require.True(t, probeBeforeCutover(Config{Engine: engine.Config{CredentialCheck: engine.CredentialCheckBeforeCutover}}))
	require.False(t, probeBeforeCutover(Config{Engine: engine.Config{CredentialCheck: engine.CredentialCheckSeed}}))
}
