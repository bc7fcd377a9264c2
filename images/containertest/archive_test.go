package containertest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/images/imagestest"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/runtimes"
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

// The gateway image carries a Node compile cache filled at build by a
// warm-up boot (scripts/images.sh warm_compile_cache) under the key the
// OpenClaw launcher computes from the package.json the image carries
// (version, mtime in ms, size) and below it the pinned Node's own
// subdirectory: a runtime bump, a package.json whose mtime the archive
// changed, or a cache warmed for another Node all fail here.
func TestGatewayImageCompileCache(t *testing.T) {
	u := unpacked[images[imagestest.Gateway].Ref]
	env := map[string]string{}
	for _, kv := range u.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	require.Equal(t, contract.PathCompileCache, env[contract.EnvCompileCache])
	mjs := filepath.Join(u.RootFS, env[contract.EnvOpenClawMJS])
	base := filepath.Join(u.RootFS, contract.PathCompileCache)
	key, err := runtimes.CompileCacheKey(mjs)
	require.NoError(t, err)
	require.Equal(t, "openclaw/"+runtimes.OpenClawVersion, filepath.Dir(key), "keyed for the pinned runtime")
	st, err := os.Stat(filepath.Join(filepath.Dir(mjs), "package.json"))
	require.NoError(t, err)
	require.Zero(t, st.ModTime().Nanosecond(), "package.json's mtime is whole seconds: the key survives any archive")
	// Node's subdirectory names its version and the user: the image's
	uid, _, _ := strings.Cut(u.Config.User, ":")
	nodeDirs, err := filepath.Glob(filepath.Join(base, key, "v"+runtimes.NodeVersion+"-x64-*-"+uid))
	require.NoError(t, err)
	require.Len(t, nodeDirs, 1, "one cache of the pinned Node and the image's user under the launcher's key; have: %v", ls(t, base))
	require.Greater(t, runtimes.CompileCacheEntries(nodeDirs[0]), 1000, "a gateway boot's modules")
	// the image's COPY makes every file root's: an entry the image's user
	// cannot read is a miss at every boot
	var unreadable []string
	require.NoError(t, filepath.WalkDir(nodeDirs[0], func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if fi, err := d.Info(); err != nil || fi.Mode().Perm()&0o004 == 0 {
			unreadable = append(unreadable, filepath.Base(p))
		}
		return nil
	}))
	require.Empty(t, unreadable, "cache entries the image's user %s cannot read", uid)
	n, err := strconv.Atoi(uid)
	require.NoError(t, err)
	require.Equal(t, runtimes.CompileCachePrebuilt, runtimes.PrebuiltCompileCacheFor(base, mjs, n))
}

// ls lists the files below dir (for failure messages).
func ls(t *testing.T, dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && len(out) < 20 {
			out = append(out, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	return out
}
