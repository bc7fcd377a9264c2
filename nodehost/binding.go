package nodehost

import (
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Binding kinds.
const (
	BindingExisting = "existing" // pins the object at path: {device, inode}
	BindingWrite    = "write"    // pins the directory a write lands in: {anchorPath, anchorDevice, anchorInode}
)

// Binding pins a path to one file-system object between the preflight and the
// real call (the gateway echoes it back as expectedBinding).
type Binding struct {
	Kind         string `json:"kind"`
	Device       string `json:"device,omitempty"`
	Inode        string `json:"inode,omitempty"`
	AnchorPath   string `json:"anchorPath,omitempty"`
	AnchorDevice string `json:"anchorDevice,omitempty"`
	AnchorInode  string `json:"anchorInode,omitempty"`
}

func existingBinding(st *unix.Stat_t) *Binding {
	return &Binding{Kind: BindingExisting, Device: strconv.FormatUint(st.Dev, 10), Inode: strconv.FormatUint(st.Ino, 10)}
}

func decimal(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// check refuses a binding that is not one of the known kinds with its fields
// (fail closed: an unknown kind is never ignored).
func (b *Binding) check() error {
	switch b.Kind {
	case BindingExisting:
		if decimal(b.Device) && decimal(b.Inode) {
			return nil
		}
	case BindingWrite:
		if filepath.IsAbs(b.AnchorPath) && decimal(b.AnchorDevice) && decimal(b.AnchorInode) {
			return nil
		}
	default:
		return cmdErr(CodeInvalidRequest, "unknown binding kind")
	}
	return cmdErr(CodeInvalidRequest, "incomplete %s binding", b.Kind)
}

// matches reports whether st is the object an existing binding names.
func (b *Binding) matches(st *unix.Stat_t) bool {
	got := existingBinding(st)
	return b.Device == got.Device && b.Inode == got.Inode
}

// checkAnchor compares the directory dirfd with a write binding's anchor.
func checkAnchor(dirfd int, b *Binding) error {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return cmdErr(CodeUnavailable, "stat failed")
	}
	if b.AnchorDevice != strconv.FormatUint(st.Dev, 10) || b.AnchorInode != strconv.FormatUint(st.Ino, 10) {
		return cmdErr(CodeBindingMismatch, "the target directory changed since the preflight")
	}
	return nil
}
