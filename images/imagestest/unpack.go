package imagestest

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image layout scripts/images.sh writes.
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// ErrArchive reports an OCI archive this package cannot read.
var ErrArchive = errors.New("imagestest: bad OCI archive")

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type index struct {
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	Config      descriptor        `json:"config"`
	Layers      []descriptor      `json:"layers"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Config is the part of an image configuration a container runtime uses.
type Config struct {
	User       string            `json:"User"`
	Env        []string          `json:"Env"`
	Entrypoint []string          `json:"Entrypoint"`
	Cmd        []string          `json:"Cmd"`
	WorkingDir string            `json:"WorkingDir"`
	Labels     map[string]string `json:"Labels"`
}

// Unpacked is an image's root filesystem and metadata.
type Unpacked struct {
	RootFS string
	Config Config
	// Name is the index's io.containerd.image.name (what ctr import names it).
	Name string
	// Annotations are the manifest's annotations.
	Annotations map[string]string
	Digest      string // manifest digest
}

// Unpack applies the archive's layers (whiteouts honoured, ownership,
// modes and regular files' mtimes kept) into a root filesystem under CacheDir()/rootfs/<manifest
// digest>, once: an existing complete one is reused. It must run as root.
// Callers mount it read-only; nobody writes into it.
func Unpack(archive string) (*Unpacked, error) {
	idx, err := readIndex(archive)
	if err != nil {
		return nil, err
	}
	var md descriptor
	for _, d := range idx.Manifests {
		if d.MediaType == mediaManifest {
			md = d
			break
		}
	}
	if md.Digest == "" {
		return nil, fmt.Errorf("%w: index names no image manifest", ErrArchive)
	}
	var m manifest
	if err := readJSONBlob(archive, md.Digest, &m); err != nil {
		return nil, err
	}
	u := &Unpacked{Name: md.Annotations["io.containerd.image.name"], Annotations: m.Annotations, Digest: md.Digest}
	var cfg struct {
		Config Config `json:"config"`
	}
	if err := readJSONBlob(archive, m.Config.Digest, &cfg); err != nil {
		return nil, err
	}
	u.Config = cfg.Config
	hex := strings.TrimPrefix(md.Digest, "sha256:")
	u.RootFS = filepath.Join(CacheDir(), "rootfs", hex)
	if _, err := os.Stat(u.RootFS + ".done"); err == nil {
		now := time.Now()
		_ = os.Chtimes(u.RootFS+".done", now, now) // recently used: kept by prune
		return u, nil
	}
	if err := os.MkdirAll(filepath.Dir(u.RootFS), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(u.RootFS), hex+".partial-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if err := applyLayer(archive, l, tmp); err != nil {
			return nil, err
		}
	}
	_ = os.RemoveAll(u.RootFS)
	if err := os.Rename(tmp, u.RootFS); err != nil {
		return nil, err
	}
	if err := os.WriteFile(u.RootFS+".done", []byte(md.Digest+"\n"), 0o644); err != nil {
		return nil, err
	}
	prune(filepath.Dir(u.RootFS), keepRootFS)
	return u, nil
}

// keepRootFS is how many unpacked images stay cached (three images, two
// generations: a test of another branch may still run on the older ones).
const keepRootFS = 6

// prune removes all but the keep most recently used unpacked images (and
// partial ones left by an interrupted unpack over an hour ago).
func prune(dir string, keep int) {
	done, _ := filepath.Glob(filepath.Join(dir, "*.done"))
	sort.Slice(done, func(i, j int) bool { return mtime(done[i]).After(mtime(done[j])) })
	for i, d := range done {
		if i >= keep {
			_ = os.Remove(d)
			_ = os.RemoveAll(strings.TrimSuffix(d, ".done"))
		}
	}
	partial, _ := filepath.Glob(filepath.Join(dir, "*.partial-*"))
	for _, p := range partial {
		if time.Since(mtime(p)) > time.Hour {
			_ = os.RemoveAll(p)
		}
	}
}

func mtime(p string) time.Time {
	st, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// readIndex reads the archive's index.json.
func readIndex(archive string) (*index, error) {
	var idx index
	err := withEntry(archive, "index.json", func(r io.Reader) error { return json.NewDecoder(r).Decode(&idx) })
	if err != nil {
		return nil, err
	}
	return &idx, nil
}

func blobPath(digest string) (string, error) {
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok || alg != "sha256" || len(hex) != 64 || strings.ContainsAny(hex, "./") {
		return "", fmt.Errorf("%w: digest %q", ErrArchive, digest)
	}
	return "blobs/sha256/" + hex, nil
}

func readJSONBlob(archive, digest string, v any) error {
	p, err := blobPath(digest)
	if err != nil {
		return err
	}
	return withEntry(archive, p, func(r io.Reader) error { return json.NewDecoder(r).Decode(v) })
}

// withEntry calls fn with the content of the archive member name.
func withEntry(archive, name string, fn func(io.Reader) error) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f) // an *os.File seeks past the members it skips
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %s has no %s", ErrArchive, filepath.Base(archive), name)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrArchive, err)
		}
		if path.Clean(strings.TrimPrefix(h.Name, "./")) == name {
			return fn(tr)
		}
	}
}

func applyLayer(archive string, l descriptor, dst string) error {
	p, err := blobPath(l.Digest)
	if err != nil {
		return err
	}
	return withEntry(archive, p, func(r io.Reader) error {
		switch l.MediaType {
		case mediaLayerGz:
			zr, err := gzip.NewReader(r)
			if err != nil {
				return fmt.Errorf("%w: layer %s: %v", ErrArchive, l.Digest, err)
			}
			defer zr.Close()
			r = zr
		case mediaLayer:
		default:
			return fmt.Errorf("%w: layer media type %s", ErrArchive, l.MediaType)
		}
		return extract(tar.NewReader(r), dst)
	})
}

// extract applies one layer tar onto dst.
func extract(tr *tar.Reader, dst string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrArchive, err)
		}
		rel := path.Clean("/" + h.Name)
		if rel == "/" {
			continue
		}
		target := filepath.Join(dst, rel)
		dir, base := filepath.Split(target)
		switch {
		case base == ".wh..wh..opq":
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			}
			continue
		case strings.HasPrefix(base, ".wh."):
			if err := os.RemoveAll(filepath.Join(dir, strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeDir {
			if err := os.RemoveAll(target); err != nil {
				return err
			}
		}
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o4000 != 0 {
			mode |= os.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			mode |= os.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		case tar.TypeLink:
			if err := os.Link(filepath.Join(dst, path.Clean("/"+h.Linkname)), target); err != nil {
				return err
			}
			continue
		default:
			continue // devices and fifos: a container runtime provides /dev
		}
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			// as containerd unpacks: the OpenClaw launcher keys its compile
			// cache by package.json's mtime
			if err := os.Chtimes(target, h.ModTime, h.ModTime); err != nil {
				return err
			}
		}
	}
}
