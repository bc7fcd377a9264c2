package local

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
)

func TestLogsTail(t *testing.T) {
	d := &Driver{cfg: Config{DataDir: t.TempDir()}}
	rev := embeddedRev("rev1", "good")
	require.NoError(t, os.MkdirAll(d.RevisionDir(rev), 0o700))
	var b bytes.Buffer
	for i := range 10 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(d.RevisionDir(rev), "gateway.log"), b.Bytes(), 0o600))
	var out bytes.Buffer
	require.NoError(t, d.Logs(t.Context(), rev, compute.LogOptions{Container: compute.ContainerGateway, Tail: 3}, &out))
	require.Equal(t, "line 7\nline 8\nline 9\n", out.String())
	err := d.Logs(t.Context(), rev, compute.LogOptions{Container: compute.ContainerHarness}, &out)
	require.ErrorIs(t, err, compute.ErrNoLogs)
}
