// Package atomicfile replaces files atomically: readers see the old content
// or the new, never a partial write, and a crash leaves one of the two. The
// new content is written to a temporary file in the same directory (so the
// rename never crosses a file system), given its mode before any byte is
// written, synced, renamed over the target, and the directory is synced so
// the rename itself is durable.
//
// Every file oce writes for another process to read — secrets, rendered
// configurations, enrollment codes, pid and route records, device tokens —
// goes through this package.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFrom replaces path, mode perm, with what fill writes. When fill (or
// any step) fails, path is untouched and the temporary file is removed.
func WriteFrom(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	// The mode is set before the content exists, so a secret is never
	// readable by others, not even for an instant.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err := fill(f); err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", filepath.Base(path), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		done = true
		return fmt.Errorf("atomicfile: %w", err)
	}
	done = true
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable; a directory that cannot be opened
// or synced (some file systems refuse) leaves the rename merely atomic.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
