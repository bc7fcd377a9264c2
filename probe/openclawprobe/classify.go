package openclawprobe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"oce.dev/oce/shared/cgroupcpu"
	"oce.dev/oce/shared/codes"
)

// Probe statuses OpenClaw 2026.9.6 reports per result
// (src/commands/models/list.probe.ts): ok, auth, rate_limit, billing,
// timeout, format, unknown, no_model.
const (
	statusOK      = "ok"
	statusAuth    = "auth"
	statusTimeout = "timeout"
)

// failedStatuses are the statuses that name themselves as cause detail;
// any other status string is "other".
var failedStatuses = map[string]bool{"format": true, "rate_limit": true, "billing": true,
	"unknown": true, "no_model": true}

// Cause details outside the status set.
const (
	detailJSON  = "json"
	detailShape = "shape"
	// detailMaxBuffer mirrors Node's execFile error code for a child whose
	// output passed maxBuffer (the reference runs the probe through it).
	detailMaxBuffer = "error-ERR_CHILD_PROCESS_STDIO_MAXBUFFER"
)

func failed(kind codes.CauseKind, detail string) Result {
	return Result{Code: codes.ModelProbeFailed, Cause: &codes.Cause{Kind: kind, Detail: detail}}
}

// classify maps one probe outcome to a code (docs/design/reference.md#s2-1 result mapping).
func classify(o outcome, provider string) Result {
	r := classifyOutcome(o, provider)
	r.Elapsed, r.CPUWaitMs = o.elapsed, o.cpuWaitMs
	return r
}

func classifyOutcome(o outcome, provider string) Result {
	switch {
	case o.startErr != nil:
		var errno syscall.Errno
		if errors.As(o.startErr, &errno) && unix.ErrnoName(errno) != "" {
			r := failed(codes.CauseProcessExit, "error-"+unix.ErrnoName(errno))
			r.Err = o.startErr
			return r
		}
		r := failed(codes.CauseWrapperError, "spawn")
		r.Err = o.startErr
		return r
	case o.cancelled != nil:
		return Result{Code: codes.Unavailable, Err: o.cancelled}
	case o.capHit:
		if cgroupcpu.Starved(o.elapsed, o.cpuWaitMs) {
			return Result{Code: codes.ModelProbeCPUStarved}
		}
		return Result{Code: codes.ModelProbeTimeout}
	case o.overflow:
		return failed(codes.CauseProcessExit, detailMaxBuffer)
	}
	if o.status == nil {
		r := failed(codes.CauseWrapperError, "wait")
		r.Err = o.waitErr
		return r
	}
	if !o.status.Exited {
		name := unix.SignalName(o.status.Signal)
		if name == "" {
			name = fmt.Sprint(int(o.status.Signal))
		}
		return failed(codes.CauseProcessExit, "signal-"+name)
	}
	if c := o.status.Code; c != 0 {
		return failed(codes.CauseProcessExit, fmt.Sprintf("exit-%d", c))
	}
	if o.readErr != nil {
		r := failed(codes.CauseWrapperError, "read")
		r.Err = o.readErr
		return r
	}
	status, cause := parseStatus(o.stdout, provider)
	if cause != "" {
		return failed(codes.CauseInvalidOutput, cause)
	}
	return statusResult(status)
}

// statusResult maps an OpenClaw probe status to a probe code.
func statusResult(status string) Result {
	switch status {
	case statusOK:
		return Result{Code: codes.Ready}
	case statusAuth:
		return Result{Code: codes.AuthenticationFailed}
	case statusTimeout:
		return Result{Code: codes.ModelProbeTimeout}
	}
	if failedStatuses[status] {
		return failed(codes.CauseProbeStatus, status)
	}
	return failed(codes.CauseProbeStatus, "other")
}

// statusDoc is the part of `models status --json` output the probe reads:
// auth.probes.results[].{provider,status}.
type statusDoc struct {
	Auth *struct {
		Probes *struct {
			Results *[]json.RawMessage `json:"results"`
		} `json:"probes"`
	} `json:"auth"`
}

type probeRow struct {
	Provider *string         `json:"provider"`
	Status   json.RawMessage `json:"status"`
}

// parseStatus returns the status of the first probe result for provider, or
// an INVALID_OUTPUT detail: "json" when stdout is not exactly one JSON
// object, "shape" when it lacks auth.probes.results or a string status for
// the provider.
func parseStatus(stdout []byte, provider string) (status, invalid string) {
	dec := json.NewDecoder(bytes.NewReader(stdout))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return "", detailJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", detailJSON
	}
	var doc statusDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", detailShape
	}
	if doc.Auth == nil || doc.Auth.Probes == nil || doc.Auth.Probes.Results == nil {
		return "", detailShape
	}
	for _, rr := range *doc.Auth.Probes.Results {
		var row probeRow
		if err := json.Unmarshal(rr, &row); err != nil || row.Provider == nil {
			return "", detailShape
		}
		if !strings.EqualFold(strings.TrimSpace(*row.Provider), provider) {
			continue
		}
		var s string
		if err := json.Unmarshal(row.Status, &s); err != nil {
			return "", detailShape
		}
		return s, ""
	}
	return "", detailShape
}
