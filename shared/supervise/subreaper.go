package supervise

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IsPID1 reports whether this process is the init of its PID namespace,
// which inherits every orphan without registering for it.
func IsPID1() bool { return os.Getpid() == 1 }

// becomeSubreaper registers the process as a child subreaper, so orphaned
// descendants are reparented to it (and reaped by it) instead of to PID 1.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("%w: prctl(PR_SET_CHILD_SUBREAPER): %w", ErrSubreaper, err)
	}
	return nil
}

// IsSubreaper reports whether the process is registered as child subreaper.
func IsSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, fmt.Errorf("%w: prctl(PR_GET_CHILD_SUBREAPER): %w", ErrSubreaper, err)
	}
	return v != 0, nil
}
