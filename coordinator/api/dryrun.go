package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"oce.dev/oce/coordinator/state"
)

// Server-side dry runs (docs/API.md, "Dry runs"). A create, update or
// deploy sent with ?dryRun=server runs its handler in full — decoding,
// validation, authorization, admission, quota, the references — and
// answers what the write would have answered, but every proposal the
// request makes (the write itself, and the audit record of a refusal) is
// applied to a private copy of the leader's state instead of the Raft log.
// The copy runs the state machine's own checks too, so the answer is the
// real one; nothing is replicated, stored or audited, and no value reaches
// the compute driver's credential store.

const (
	// DryRunParam is the query parameter that asks for a dry run.
	DryRunParam = "dryRun"
	// DryRunServer is its one accepted value: validated by the server.
	DryRunServer = "server"
	// DryRunHeader marks the answer of a dry run.
	DryRunHeader = "Oce-Dry-Run"
)

// dryRunRoutes are the writes a dry run may ask for: those whose only
// effect is their proposals (a credential source's value write is skipped,
// see putValues). Deletions and stops act outside the log and refuse it.
var dryRunRoutes = map[string]bool{
	"POST /v1/namespaces":                                 true,
	"PUT /v1/namespaces/{ns}/quota":                       true,
	"POST /v1/namespaces/{ns}/configurations":             true,
	"PUT /v1/namespaces/{ns}/configurations/{cfg}":        true,
	"POST /v1/namespaces/{ns}/agents":                     true,
	"PATCH /v1/namespaces/{ns}/agents/{agent}":            true,
	"POST /v1/namespaces/{ns}/agents/{agent}/deploy":      true,
	"POST /v1/namespaces/{ns}/credentials":                true,
	"POST /v1/namespaces/{ns}/credentials/{cred}/rotate":  true,
	"POST /v1/rolebindings":                               true,
	"PUT /v1/namespaces/{ns}/labels":                      true,
	"PUT /v1/namespaces/{ns}/configurations/{cfg}/labels": true,
	"PUT /v1/namespaces/{ns}/agents/{agent}/labels":       true,
	"PUT /v1/rolebindings/{id}/labels":                    true,
}

type dryRunKey struct{}

// dryRun is one dry-run request's private state: a copy of the leader's,
// made at its first proposal, which its later proposals see.
type dryRun struct {
	once sync.Once
	m    *state.Machine
	err  error
}

// dryRunnable refuses a dry run the route does not support, and marks the
// context of one it does.
func (s *server) dryRunnable(pattern string, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		vals, ok := q[DryRunParam]
		if !ok {
			return h(w, r)
		}
		if len(vals) != 1 || vals[0] != DryRunServer {
			return invalid("%s must be %q", DryRunParam, DryRunServer)
		}
		if !dryRunRoutes[pattern] {
			return invalid("%s does not support %s=%s: only creates, updates and deploys do", pattern, DryRunParam, DryRunServer)
		}
		w.Header().Set(DryRunHeader, DryRunServer)
		return h(w, r.WithContext(context.WithValue(r.Context(), dryRunKey{}, &dryRun{})))
	}
}

// isDryRun reports whether r is a dry run.
func isDryRun(r *http.Request) bool {
	_, ok := r.Context().Value(dryRunKey{}).(*dryRun)
	return ok
}

// dryRunProposer applies proposals to the request's private copy of the
// state, as the leader's store would apply them to the real one.
type dryRunProposer struct {
	s     *server
	run   *dryRun
	actor string
}

func (p dryRunProposer) Propose(ctx context.Context, typ string, payload any) (any, error) {
	p.run.once.Do(func() {
		// A snapshot's bytes are the state's canonical copy: restoring
		// them yields a Machine no write of this request can alias.
		b, err := p.s.b.Machine().MarshalSnapshot()
		if err != nil {
			p.run.err = err
			return
		}
		m := state.NewMachine()
		p.run.err = m.RestoreSnapshot(b)
		p.run.m = m
	})
	if p.run.err != nil {
		return nil, p.run.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entry, err := state.EncodeStamped(typ, time.Now(), p.actor, state.IdempotencyFrom(ctx), payload)
	if err != nil {
		return nil, err
	}
	return p.run.m.ApplyBytes(entry)
}
