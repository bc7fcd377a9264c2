// Package nodehost is an OpenClaw node written in Go: it enrolls to a Gateway
// over WebSocket as role node (one-use enrollment file → persisted device
// token), serves the Harness workspace through file and command handlers
// behind a node-side path policy, watches Memory files, and admits session
// workers up to a capacity without ever displacing an active one.
package nodehost

import (
	"errors"
	"fmt"
)

// Code is a closed-set error code returned to the gateway in
// node.invoke.result errors.
type Code string

// Command error codes.
const (
	CodeInvalidRequest    Code = "INVALID_REQUEST"
	CodeUnavailable       Code = "UNAVAILABLE"
	CodeOutsideRoot       Code = "PATH_OUTSIDE_ROOT"
	CodeTraversal         Code = "PATH_TRAVERSAL"
	CodeSymlink           Code = "PATH_SYMLINK"
	CodeNotFound          Code = "PATH_NOT_FOUND"
	CodeNotWritable       Code = "PATH_NOT_WRITABLE"
	CodeNotFile           Code = "NOT_A_FILE"
	CodeNotDirectory      Code = "NOT_A_DIRECTORY"
	CodeHardLink          Code = "PATH_HARDLINK" // a regular file with more than one link: its other names may lie outside the roots
	CodeTooLarge          Code = "PAYLOAD_TOO_LARGE"
	CodeBindingMismatch   Code = "BINDING_MISMATCH"
	CodeCanonicalMismatch Code = "CANONICAL_PATH_MISMATCH"
	CodeSHA256Mismatch    Code = "SHA256_MISMATCH"
	CodeRunDenied         Code = "SYSTEM_RUN_DENIED"
	CodeCapacity          Code = "WORKER_CAPACITY_EXHAUSTED"
	CodeWorkerNotFound    Code = "WORKER_NOT_FOUND"
)

// CommandError is a failed command with a closed code; Message never carries
// file contents or credentials.
type CommandError struct {
	Code    Code
	Message string
}

func (e *CommandError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func cmdErr(code Code, format string, args ...any) *CommandError {
	return &CommandError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// codeOf extracts the closed code of err (UNAVAILABLE when it has none).
func codeOf(err error) (Code, string) {
	var ce *CommandError
	if errors.As(err, &ce) {
		return ce.Code, ce.Message
	}
	return CodeUnavailable, "internal error"
}

// Sentinel errors of the process lifecycle.
var (
	// ErrEnrollmentInsecure: the enrollment file breaks the shared secret
	// file rule (package secretfile).
	ErrEnrollmentInsecure = errors.New("nodehost: enrollment file must be readable by this user (and its group) only")
	// ErrNotEnrolled: no device token and no usable enrollment file.
	ErrNotEnrolled = errors.New("nodehost: not enrolled: no device token and no enrollment file")
	// ErrEnrollmentExpired: the one-use setup code expired before first use.
	ErrEnrollmentExpired = errors.New("nodehost: enrollment code expired")
	// ErrFatal: the gateway refused the node for good; exit for a
	// supervisor restart.
	ErrFatal = errors.New("nodehost: gateway refused the node")
	// ErrStateServed: the state directory (identity, device token,
	// enrollment copy) lies inside the workspace or a Skill root the node
	// serves.
	ErrStateServed = errors.New("nodehost: the state directory must lie outside the workspace and Skill roots")
	// ErrBadCapacity: OPENCLAW_NATIVE_WORKER_CAPACITY outside 1–1024.
	ErrBadCapacity = errors.New("nodehost: worker capacity must be an integer from 1 to 1024")
)
