package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/client"
)

// A write made with a WithDryRun context is answered like the write and
// changes nothing; reads are unaffected; an unsupported write is refused.
func TestDryRunWrites(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	c := client.New(serve(t, b, false).URL, token)
	dry := client.WithDryRun(ctx)
	require.True(t, client.IsDryRun(dry))
	require.False(t, client.IsDryRun(ctx))

	ns, err := c.CreateNamespace(dry, "team")
	require.NoError(t, err)
	require.Equal(t, "team", ns.Name)
	require.Zero(t, b.Proposals(), "nothing proposed")
	_, err = c.Namespace(ctx, "team")
	require.Error(t, err, "nothing created")

	_, err = c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	got, err := c.Namespaces(dry)
	require.NoError(t, err)
	require.Len(t, got, 1, "a read ignores the dry run")
	_, err = c.DeleteNamespace(dry, "team")
	require.ErrorContains(t, err, "dryRun")
	_, err = c.Namespace(ctx, "team")
	require.NoError(t, err, "the refused dry-run delete removed nothing")
}
