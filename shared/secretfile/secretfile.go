// Package secretfile reads the credentials oce's processes receive as files,
// with one rule for every reader (gatewayd, harnessd, nodehost, the
// coordinator's token): the file is followed through symlinks (a Kubernetes
// Secret volume entry is `key -> ..data/key -> ..<timestamp>/key`), must be a
// regular file owned by this user or by root, must not be writable by group
// or others nor readable by others, and may be group-readable only by a group
// this process belongs to — what kubelet delivers for a Secret volume with a
// defaultMode and an fsGroup (root-owned, mode 0440, group = fsGroup).
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"oce.dev/oce/shared/logging"
)

// Code is the closed code logged for a secret file that is refused.
const Code = "INSECURE_SECRET_FILE"

// ErrInsecure rejects a secret file others could read or change.
var ErrInsecure = errors.New("secretfile: " + Code)

// Check applies the rule to path (symlinks followed) and returns the file's
// info. Errors name only the file's base name: paths stay out of logs.
func Check(path string) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInsecure, name)
	}
	perm := st.Mode().Perm()
	if perm&0o027 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o (others may read, or group/others may write)", ErrInsecure, name, perm)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no owner information", ErrInsecure, name)
	}
	if int(sys.Uid) != os.Geteuid() && sys.Uid != 0 {
		return nil, fmt.Errorf("%w: %s is owned by uid %d, neither this user nor root", ErrInsecure, name, sys.Uid)
	}
	if perm&0o040 != 0 && !inGroup(int(sys.Gid)) {
		return nil, fmt.Errorf("%w: %s is readable by group %d, which this process is not in", ErrInsecure, name, sys.Gid)
	}
	return st, nil
}

// inGroup reports whether gid is this process's group or a supplementary one
// (kubelet adds the fsGroup as a supplementary group).
func inGroup(gid int) bool {
	if gid == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}

// Read checks path and returns its content with surrounding whitespace
// trimmed; the value is registered with the log redactor at once.
func Read(path string) (string, error) {
	if _, err := Check(path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("secretfile: read %s: %w", filepath.Base(path), err)
	}
	v := strings.TrimSpace(string(b))
	logging.Scrub(v)
	return v, nil
}
