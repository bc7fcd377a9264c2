package engine

import (
	"errors"
	"log/slog"
	"math"
	"sync"
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
//
// The driver's rate is a ceiling, not a promise: the compute target may be
// slower than the client budget assumes (a shared API server, etcd behind
// it). When a driver call fails with the target's own overload signal
// (compute.ErrOverloaded), the start rate halves — at most once per
// OverloadCutGap, however many calls fail together — and doubles back
// after each OverloadCalm without a signal, up to the driver's rate. The
// activations already under way then meet a target that has room to
// finish them, instead of a growing crowd behind them.

// Admission back-off bounds.
const (
	// OverloadCutGap coalesces the signals of one moment (a storm's
	// concurrent calls failing together) into one cut.
	OverloadCutGap = 2 * time.Second
	// OverloadCalm is how long without a signal before the rate doubles
	// back toward the driver's.
	OverloadCalm = 30 * time.Second
	// MaxOverloadCuts bounds the back-off: at most 2^6 = 64 times slower
	// than the driver's rate, so admission never stops for good.
	MaxOverloadCuts = 6
)

// admission paces new activations for a driver that declared a rate.
type admission struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	ceiling float64 // the driver's rate
	burst   int     // the driver's burst
	cuts    int     // halvings in effect
	lastCut time.Time
	calm    time.Time // the last signal, or the last step back up
	log     *slog.Logger
}

// admissionFor is the admission for d, or nil when d admits freely.
func admissionFor(d compute.Driver, log *slog.Logger) *admission {
	a, ok := d.(compute.Admitter)
	if !ok {
		return nil
	}
	r, burst := a.AdmissionRate()
	if r <= 0 {
		return nil
	}
	burst = max(1, burst)
	return &admission{lim: rate.NewLimiter(rate.Limit(r), burst), ceiling: r, burst: burst, log: log}
}

// allowedAt reports whether one start is available at now; it takes nothing.
func (a *admission) allowedAt(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recover(now)
	return a.lim.TokensAt(now) >= 1
}

// take spends one start at now.
func (a *admission) take(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lim.AllowN(now, 1)
}

// overloaded records the target's overload signal at now.
func (a *admission) overloaded(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calm = now
	if a.cuts >= MaxOverloadCuts || (!a.lastCut.IsZero() && now.Sub(a.lastCut) < OverloadCutGap) {
		return
	}
	a.cuts++
	a.lastCut = now
	a.apply(now)
	a.log.Warn("compute target overloaded; starting activations more slowly", "starts_per_second", a.rate(), "cuts", a.cuts)
}

// recover steps the rate back up once per calm period without a signal.
func (a *admission) recover(now time.Time) {
	for a.cuts > 0 && now.Sub(a.calm) >= OverloadCalm {
		a.cuts--
		a.calm = a.calm.Add(OverloadCalm)
		a.apply(now)
		a.log.Info("compute target calm; starting activations faster", "starts_per_second", a.rate(), "cuts", a.cuts)
	}
}

// apply sets the limiter for the cuts in effect; while backed off there is
// no burst, so a recovering target is not met by a saved-up crowd.
func (a *admission) apply(now time.Time) {
	a.lim.SetLimitAt(now, rate.Limit(a.rate()))
	if a.cuts > 0 {
		a.lim.SetBurstAt(now, 1)
		return
	}
	a.lim.SetBurstAt(now, a.burst)
}

// rate is the start rate in effect (per second).
func (a *admission) rate() float64 { return a.ceiling / math.Exp2(float64(a.cuts)) }

// gated reports whether w starts an activation (the admission applies).
func gated(w state.Work) bool {
	return w.Kind == state.WorkActivate && w.Phase == state.PhaseQueued
}

// mayStart reports whether w may be claimed at now; it takes nothing.
func (e *Engine) mayStart(w state.Work, now time.Time) bool {
	return e.starts == nil || !gated(w) || e.starts.allowedAt(now)
}

// started spends w's admission, once it is reserved for claiming.
func (e *Engine) started(w state.Work, now time.Time) {
	if e.starts != nil && gated(w) {
		e.starts.take(now)
	}
}

// sawOverload records the target's overload signal when err carries it,
// and slows admission.
func (e *Engine) sawOverload(err error) {
	if !errors.Is(err, compute.ErrOverloaded) {
		return
	}
	now := e.clk.Now()
	e.overload.mark(now)
	if e.starts != nil {
		e.starts.overloaded(now)
	}
}

// overloadMark is when a driver call last met the target's overload
// signal.
type overloadMark struct {
	mu sync.Mutex
	at time.Time
}

func (o *overloadMark) mark(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.After(o.at) {
		o.at = now
	}
}

// recent reports whether the target signaled overload within OverloadCalm
// of now.
func (o *overloadMark) recent(now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.at.IsZero() && now.Sub(o.at) < OverloadCalm
}
