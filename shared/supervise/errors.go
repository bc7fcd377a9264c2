package supervise

import "errors"

// Sentinel errors callers branch on.
var (
	// ErrInvalidSpec reports a Spec or RunSpec that cannot be started.
	ErrInvalidSpec = errors.New("supervise: invalid spec")
	// ErrNotFound reports a program that is not in PATH.
	ErrNotFound = errors.New("supervise: program not found")
	// ErrStart reports a failed fork/exec or stdio setup.
	ErrStart = errors.New("supervise: cannot start process")
	// ErrStopping reports a Start after a stop was requested.
	ErrStopping = errors.New("supervise: stopping, no new processes")
	// ErrFinished reports a signal to a child that has already been collected.
	ErrFinished = errors.New("supervise: process already finished")
	// ErrSubreaper reports that the process could not become a child subreaper.
	ErrSubreaper = errors.New("supervise: cannot become child subreaper")
	// ErrTimeout reports a RunCommand child killed at its deadline.
	ErrTimeout = errors.New("supervise: command deadline exceeded")
	// ErrOutputLimit reports a RunCommand child killed for writing more than
	// its output cap.
	ErrOutputLimit = errors.New("supervise: command output limit exceeded")
)
