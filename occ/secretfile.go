package occ

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// writeSecretFile writes a secret (a minted token) to path, readable by
// its owner only: a new file is created 0600 exclusively; a symbolic link
// is refused, never followed (it could point anywhere the secret must not
// go); an existing regular file gets mode 0600 before the secret is
// written into it. Anything else (a directory, a FIFO, a device) is
// refused.
func writeSecretFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		f, err = openExisting(path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// openExisting opens an existing regular file for the secret, its mode
// fixed to 0600 and its content emptied first.
func openExisting(path string) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symbolic link: refusing to write a secret through it", path)
	}
	// O_NOFOLLOW: a link swapped in after the check fails here (ELOOP);
	// O_NONBLOCK: a FIFO does not block the open.
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: refusing to write a secret through it", path)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file: refusing to write a secret to it", path)
	}
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
