package engine

import (
	"time"

	"golang.org/x/time/rate"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// Admission (issue 27): a driver whose requests are rate-limited says how
// fast it can start activations (compute.Admitter). Work that has not
// started — an activation still in its queued phase — is claimed no faster
// than that; work under way, stops, deletes and rollbacks are never held
// back. What waits stays queued in the replicated state: it costs the driver
// nothing and a new leader admits it the same way.

// admissionLimiter is the start limiter for d, or nil when d admits freely.
func admissionLimiter(d compute.Driver) *rate.Limiter {
	a, ok := d.(compute.Admitter)
	if !ok {
		return nil
	}
	r, burst := a.AdmissionRate()
	if r <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(r), max(1, burst))
}

// gated reports whether w starts an activation (the admission applies).
func gated(w state.Work) bool {
	return w.Kind == state.WorkActivate && w.Phase == state.PhaseQueued
}

// mayStart reports whether w may be claimed at now; it takes nothing.
func (e *Engine) mayStart(w state.Work, now time.Time) bool {
	return e.starts == nil || !gated(w) || e.starts.TokensAt(now) >= 1
}

// started spends w's admission, once it is reserved for claiming.
func (e *Engine) started(w state.Work, now time.Time) {
	if e.starts != nil && gated(w) {
		e.starts.AllowN(now, 1)
	}
}
