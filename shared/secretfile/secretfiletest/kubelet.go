// Package secretfiletest lays out secret files the way kubelet delivers a
// Secret (or projected) volume, for tests of every reader.
package secretfiletest

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// KubeletVolume writes data into dir as kubelet's atomic writer does for a
// Secret volume with defaultMode and fsGroup: a timestamped directory holding
// the files, a `..data` symlink to it and one `key -> ..data/key` symlink per
// key; files and directories owned by root with group fsGroup, files mode
// defaultMode|0440 (kubelet adds group read for a read-only volume with an
// fsGroup). fsGroup < 0 leaves ownership and modes as kubelet does without
// one. The caller must be root to chown; dir is created.
func KubeletVolume(dir string, data map[string][]byte, defaultMode os.FileMode, fsGroup int) error {
	ts := "..2026_12_01_00_00_00." + fmt.Sprint(time.Now().UnixNano())
	tsDir := filepath.Join(dir, ts)
	if err := os.MkdirAll(tsDir, 0o755); err != nil {
		return err
	}
	mode := defaultMode
	if fsGroup >= 0 {
		mode |= 0o440
	}
	for k, v := range data {
		f := filepath.Join(tsDir, k)
		if err := os.WriteFile(f, v, 0o600); err != nil {
			return err
		}
		if fsGroup >= 0 {
			if err := os.Chown(f, 0, fsGroup); err != nil {
				return err
			}
		}
		if err := os.Chmod(f, mode); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			return err
		}
	}
	for _, d := range []string{tsDir, dir} {
		if fsGroup >= 0 {
			if err := os.Chown(d, 0, fsGroup); err != nil {
				return err
			}
			if err := os.Chmod(d, 0o755|os.ModeSetgid); err != nil {
				return err
			}
		}
	}
	return os.Symlink(ts, filepath.Join(dir, "..data"))
}
