package engine

import (
	"context"
	"errors"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Reauthorizer rechecks claimed work before any compute effect (docs/design/seed-000.md:
// "Claim and reauthorize revision work"): the work's original actor may
// still do it and the ownership it relies on still holds. coordinator/policy
// implements it.
type Reauthorizer interface {
	Reauthorize(ctx context.Context, w state.Work) error
}

// workCoder is an error that names the closed code its work fails with.
type workCoder interface {
	WorkCode() codes.Code
}

// reauthorized runs the Reauthorizer on a fresh claim; a refusal fails the
// work with its closed code, and nothing starts.
func (e *Engine) reauthorized(cl *claim) bool {
	if e.cfg.Reauthorizer == nil {
		return true
	}
	err := e.cfg.Reauthorizer.Reauthorize(cl.ctx, cl.work)
	if err == nil {
		return true
	}
	if cl.ctx.Err() != nil {
		return false
	}
	code := codes.ReauthorizationDenied
	var wc workCoder
	if errors.As(err, &wc) {
		code = wc.WorkCode()
	}
	cl.log.Warn("reauthorization refused", "code", code, "actor", cl.work.Actor)
	cl.fail(code, err.Error())
	return false
}
