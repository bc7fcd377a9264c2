package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/certs"
)

// The expiry gauge reads the certificate served now: a rotated pair shows
// at the reloader's next check.
func TestCertificateExpiryFollowsRotation(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	caCert, caKey, err := certs.NewCA("oce-test-ca", now)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(validFor time.Duration, stamp time.Time) {
		c, k, err := certs.Issue(caCert, caKey, "member", []string{"localhost"}, now, validFor)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(certFile, c, 0o600))
		require.NoError(t, os.WriteFile(keyFile, k, 0o600))
		for _, f := range []string{certFile, keyFile} {
			require.NoError(t, os.Chtimes(f, stamp, stamp))
		}
	}
	write(48*time.Hour, now)
	rl, err := certs.NewReloader(certFile, keyFile)
	require.NoError(t, err)
	rl.CheckEvery = 0
	require.Equal(t, float64(now.Add(48*time.Hour).Unix()), notAfter(rl))
	write(96*time.Hour, now.Add(time.Minute))
	require.Equal(t, float64(now.Add(96*time.Hour).Unix()), notAfter(rl))
}
