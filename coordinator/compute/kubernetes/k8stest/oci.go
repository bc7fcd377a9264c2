package k8stest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"time"
)

// OCI media types and annotations an image archive uses.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
	// AnnotationImageName is the full name containerd gives an imported image.
	AnnotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// ImageFile is one regular file of an Image's single layer.
type ImageFile struct {
	Mode os.FileMode
	Data []byte
}

// Image describes a FROM-scratch single-layer OCI image: what the harness
// builds for its pause sandbox and what tests build around a static binary.
type Image struct {
	// Name is the full reference (e.g. "oce.local/k8stest/podbin:1");
	// Pods use it with imagePullPolicy Never.
	Name string
	// Files maps absolute paths in the image to their content; parent
	// directories are added (0755, root-owned).
	Files      map[string]ImageFile
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// WriteOCIArchive writes img as an OCI image layout in a tar file at dst
// (the "oci-archive" form `ctr images import` and buildah read). The
// layer's timestamps are fixed, so the same input gives the same digests.
func WriteOCIArchive(dst string, img Image) error {
	if img.Name == "" {
		return fmt.Errorf("k8stest: image without a name")
	}
	layer, diffID, err := layerTarGz(img.Files)
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"architecture": "amd64", "os": "linux", "created": fixedTime.Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": img.Entrypoint, "Cmd": img.Cmd, "Env": img.Env,
			"User": img.User, "WorkingDir": img.WorkingDir},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	layerDesc := descriptor{MediaType: mediaLayerGz, Digest: digest(layer), Size: int64(len(layer))}
	cfgDesc := descriptor{MediaType: mediaConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))}
	manifest, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaManifest,
		"config": cfgDesc, "layers": []descriptor{layerDesc}})
	if err != nil {
		return err
	}
	tag := img.Name
	if i := lastColonAfterSlash(tag); i >= 0 {
		tag = tag[i+1:]
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex,
		"manifests": []descriptor{{MediaType: mediaManifest, Digest: digest(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{AnnotationImageName: img.Name, annotationRefName: tag},
			Platform:    &platform{Architecture: "amd64", OS: "linux"}}}})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: fixedTime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, ModTime: fixedTime, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layer), layer},
		{blobPath(cfgJSON), cfgJSON},
		{blobPath(manifest), manifest},
	} {
		if err := add(f.name, f.b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, out.Bytes(), 0o644)
}

var fixedTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func blobPath(b []byte) string {
	s := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(s[:])
}

// lastColonAfterSlash finds the tag separator of a reference (a colon in
// the registry host's port does not count).
func lastColonAfterSlash(ref string) int {
	for i := len(ref) - 1; i >= 0; i-- {
		switch ref[i] {
		case ':':
			return i
		case '/':
			return -1
		}
	}
	return -1
}

// layerTarGz builds the single layer and returns it gzipped with its
// uncompressed digest (the config's diff id).
func layerTarGz(files map[string]ImageFile) ([]byte, string, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dirs := map[string]bool{}
	names := make([]string, 0, len(files))
	for n := range files {
		if !path.IsAbs(n) {
			return nil, "", fmt.Errorf("k8stest: image path %q is not absolute", n)
		}
		names = append(names, n)
		for d := path.Dir(n); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	dl := make([]string, 0, len(dirs))
	for d := range dirs {
		dl = append(dl, d)
	}
	sort.Strings(dl)
	sort.Strings(names)
	for _, d := range dl {
		if err := tw.WriteHeader(&tar.Header{Name: d[1:] + "/", Mode: 0o755, ModTime: fixedTime, Typeflag: tar.TypeDir}); err != nil {
			return nil, "", err
		}
	}
	for _, n := range names {
		f := files[n]
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Name: n[1:], Mode: int64(mode.Perm()), Size: int64(len(f.Data)), ModTime: fixedTime, Typeflag: tar.TypeReg}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), digest(raw.Bytes()), nil
}
