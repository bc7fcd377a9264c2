package containertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/images/imagestest"
)

// Each archive names its image for containerd (io.containerd.image.name =
// the reference make images printed), carries the OCI labels and
// annotations, runs as 1000:1000 under tini, and holds what its Containerfile
// promises — and nothing of the build host's (.oce/, bin/, .git/).
func TestArchivesNamedLabelledAndComplete(t *testing.T) {
	for _, name := range []string{imagestest.Coordinator, imagestest.Gateway, imagestest.Harness} {
		t.Run(name, func(t *testing.T) {
			img := images[name]
			u := unpacked[img.Ref]
			require.Equal(t, img.Ref, u.Name, "ctr import names the image as make images printed it")
			require.True(t, strings.HasPrefix(img.Ref, "localhost/oce/"+name+":"))
			for _, k := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision",
				"org.opencontainers.image.source", "org.opencontainers.image.title"} {
				require.NotEmpty(t, u.Annotations[k], "annotation %s", k)
				require.Equal(t, u.Annotations[k], u.Config.Labels[k], "label %s", k)
			}
			require.Equal(t, "oce-"+name, u.Config.Labels["org.opencontainers.image.title"])
			require.Equal(t, "1000:1000", u.Config.User)
			require.Equal(t, []string{"/usr/bin/tini", "-s", "-e", "143", "--"}, u.Config.Entrypoint[:5])
			files := []string{"usr/bin/tini", "etc/ssl/certs/ca-certificates.crt", "usr/lib/x86_64-linux-gnu/libatomic.so.1", "bin/sh"}
			switch name {
			case imagestest.Coordinator:
				files = append(files, "usr/local/bin/coordinator", "usr/local/bin/occ")
			case imagestest.Gateway:
				files = append(files, "usr/local/bin/gatewayd", "usr/local/bin/nodehost", "opt/oce/node/bin/node",
					"opt/oce/node/bin/npm", "opt/oce/openclaw/node_modules/openclaw/openclaw.mjs", "opt/oce/npm-cache/_cacache")
			case imagestest.Harness:
				files = append(files, "usr/local/bin/harnessd", "usr/local/bin/nodehost", "usr/local/bin/codex")
			}
			for _, f := range files {
				_, err := os.Stat(filepath.Join(u.RootFS, f))
				require.NoError(t, err, "%s in the %s image", f, name)
			}
			for _, f := range []string{".oce", ".git", "go.mod", "bin/gatewayd", "opt/oce/npm-cache/.filled"} {
				_, err := os.Lstat(filepath.Join(u.RootFS, f))
				require.True(t, os.IsNotExist(err), "%s is not in the %s image", f, name)
			}
			b, err := os.ReadFile(filepath.Join(u.RootFS, "etc", "passwd"))
			require.NoError(t, err)
			require.Contains(t, string(b), "node:x:1000:1000:", "the runtime user")
		})
	}
}
