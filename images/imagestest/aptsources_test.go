package imagestest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAptSourcesFromTheMachine: the base image's sources come from the
// machine's own apt configuration, in both styles, for the suite and its
// updates and security suites only; a machine without such a source is
// refused with the files it read.
func TestAptSourcesFromTheMachine(t *testing.T) {
	script, err := filepath.Abs("../../scripts/apt-sources.sh")
	require.NoError(t, err)
	run := func(etc string, files map[string]string) (string, error) {
		for name, body := range files {
			p := filepath.Join(etc, name)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		}
		out, err := exec.Command("bash", script, "bookworm", etc).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{name: "deb822", files: map[string]string{"sources.list.d/debian.sources": `Types: deb
# a comment
URIs: http://mirror.example.org/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://mirror.example.org/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://disabled.example.org/debian
Suites: bookworm
Components: main
Enabled: no
`}, want: []string{
			"deb http://mirror.example.org/debian bookworm main contrib",
			"deb http://mirror.example.org/debian bookworm-updates main contrib",
			"deb http://mirror.example.org/debian-security bookworm-security main",
		}},
		{name: "one-line", files: map[string]string{
			"sources.list":               "# deb http://commented.example.org/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://one.example.org/debian bookworm main\ndeb-src http://one.example.org/debian bookworm main\n",
			"sources.list.d/extra.list":  "deb http://one.example.org/debian-security bookworm-security main\ndeb http://other.example.org/ubuntu jammy main\n",
			"sources.list.d/x.list.save": "deb http://ignored.example.org/debian bookworm main\n",
		}, want: []string{
			"deb http://one.example.org/debian bookworm main",
			"deb http://one.example.org/debian-security bookworm-security main",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t.TempDir(), tc.files)
			require.NoError(t, err, out)
			require.Equal(t, tc.want, strings.Split(out, "\n"))
		})
	}
	t.Run("none for the suite", func(t *testing.T) {
		out, err := run(t.TempDir(), map[string]string{"sources.list": "deb http://x.example.org/ubuntu jammy main\n"})
		require.Error(t, err)
		require.Contains(t, out, "no 'deb' source for bookworm")
		require.Contains(t, out, "sources.list")
	})
	t.Run("the machine's own", func(t *testing.T) {
		out, err := exec.Command("bash", script, "bookworm").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "deb ")
	})
}
