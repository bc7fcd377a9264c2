// Package phase times the startup phases of a runtime wrapper (gatewayd,
// harnessd) and writes exactly one runtime.startup_phase record per phase
// (docs/design/reference.md#s1-2, docs/design/seed-001.md): container, phase, outcome, ms, sinceStartMs,
// and a code only when the phase failed.
package phase

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
)

// Outcomes of a phase.
const (
	OK     = logging.OutcomeOK
	Failed = logging.OutcomeFailed
)

// Record is one finished phase as logged.
type Record struct {
	Phase        string
	Outcome      string
	Ms           int64
	SinceStartMs int64
	// Code is set only for a failed phase with a well-formed code.
	Code codes.Code
}

// Runner times phases against one wrapper start. It is safe for concurrent
// use (watchers record peer-status-changed and gateway-respawn while the
// main flow runs).
type Runner struct {
	container string
	start     time.Time
	log       *slog.Logger
	clk       func() time.Time

	mu       sync.Mutex
	records  []Record
	observer func(Record)
	starts   func(phase string)
}

// New returns a Runner for container ("gateway" or "agent") whose wrapper
// started at start. clk nil means time.Now; log nil discards records.
func New(container string, start time.Time, log *slog.Logger, clk func() time.Time) *Runner {
	if clk == nil {
		clk = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{container: container, start: start, log: log, clk: clk}
}

// Observe registers fn to receive every Record after it is logged (for
// example to publish the current phase on the status server). fn must not
// call back into the Runner.
func (r *Runner) Observe(fn func(Record)) {
	r.mu.Lock()
	r.observer = fn
	r.mu.Unlock()
}

// ObserveStart registers fn to receive each phase's name as Run starts it
// (the status server publishes the phase running now). fn must not call
// back into the Runner.
func (r *Runner) ObserveStart(fn func(phase string)) {
	r.mu.Lock()
	r.starts = fn
	r.mu.Unlock()
}

// Run times fn as phase and logs its record. A nil error is outcome ok; any
// other error is outcome failed with the code of a *CodedError in its chain,
// or UNAVAILABLE. It returns fn's error unchanged.
func (r *Runner) Run(ctx context.Context, phase string, fn func(ctx context.Context) error) error {
	r.mu.Lock()
	starts := r.starts
	r.mu.Unlock()
	if starts != nil {
		starts(phase)
	}
	t0 := r.clk()
	err := fn(ctx)
	end := r.clk()
	if err == nil {
		r.record(phase, OK, end.Sub(t0), "", end)
		return nil
	}
	r.record(phase, Failed, end.Sub(t0), CodeOf(err), end)
	return err
}

// Record logs a phase timed elsewhere (peer-status-changed, gateway-respawn,
// …) with duration d. code is logged only when outcome is failed and the
// code is well-formed.
func (r *Runner) Record(phase, outcome string, d time.Duration, code codes.Code) Record {
	return r.record(phase, outcome, d, code, r.clk())
}

func (r *Runner) record(phase, outcome string, d time.Duration, code codes.Code, end time.Time) Record {
	rec := Record{
		Phase:        phase,
		Outcome:      outcome,
		Ms:           max(d.Milliseconds(), 0),
		SinceStartMs: max(end.Sub(r.start).Milliseconds(), 0),
	}
	if outcome == Failed && codes.WellFormed(string(code)) {
		rec.Code = code
	}
	ev := map[string]any{
		"event":        logging.EventStartupPhase,
		"container":    r.container,
		"phase":        rec.Phase,
		"outcome":      rec.Outcome,
		"ms":           rec.Ms,
		"sinceStartMs": rec.SinceStartMs,
	}
	if rec.Code != "" {
		ev["code"] = string(rec.Code)
	}
	logging.Event(context.Background(), r.log, ev)

	r.mu.Lock()
	r.records = append(r.records, rec)
	obs := r.observer
	r.mu.Unlock()
	if obs != nil {
		obs(rec)
	}
	return rec
}

// Records returns the phases recorded so far, in order.
func (r *Runner) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// SinceStart is the time elapsed since the wrapper started.
func (r *Runner) SinceStart() time.Duration { return r.clk().Sub(r.start) }

// CodedError is a phase failure carrying a closed-set code, an optional
// MODEL_PROBE_FAILED cause and the check name a held failure publishes.
type CodedError struct {
	Code  codes.Code
	Cause *codes.Cause
	Check string
	Err   error
}

// Error describes the failure: check, code, cause and the wrapped error's
// text. Log records carry only the code (Runner), never this text.
func (e *CodedError) Error() string {
	s := string(e.Code)
	if e.Check != "" {
		s = e.Check + ": " + s
	}
	if e.Cause != nil {
		s += " (" + string(e.Cause.Kind) + " " + e.Cause.Detail + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *CodedError) Unwrap() error { return e.Err }

// Fail wraps err with a code.
func Fail(code codes.Code, err error) *CodedError { return &CodedError{Code: code, Err: err} }

// FailCause wraps err with MODEL_PROBE_FAILED-style code and cause.
func FailCause(code codes.Code, cause codes.Cause, err error) *CodedError {
	return &CodedError{Code: code, Cause: &cause, Err: err}
}

// FailCheck wraps err with a code and the check name a hold publishes.
func FailCheck(check string, code codes.Code, err error) *CodedError {
	return &CodedError{Code: code, Check: check, Err: err}
}

// CodeOf returns the code of the first *CodedError in err's chain, or
// UNAVAILABLE for any other non-nil error (and for a malformed code).
// It returns "" for nil.
func CodeOf(err error) codes.Code {
	if err == nil {
		return ""
	}
	var ce *CodedError
	if errors.As(err, &ce) && codes.WellFormed(string(ce.Code)) {
		return ce.Code
	}
	return codes.Unavailable
}

// CauseOf returns the cause of the first *CodedError in err's chain.
func CauseOf(err error) *codes.Cause {
	var ce *CodedError
	if errors.As(err, &ce) {
		return ce.Cause
	}
	return nil
}

// CheckOf returns the check name of the first *CodedError in err's chain,
// or fallback (normally the phase name) when none is set.
func CheckOf(err error, fallback string) string {
	var ce *CodedError
	if errors.As(err, &ce) && ce.Check != "" {
		return ce.Check
	}
	return fallback
}
