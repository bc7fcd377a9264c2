package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/api/wire"
)

// progress is an Agent's in-flight (or last) work as the page shows it:
// its steps, the current one, and the time since it was requested.
type progress struct {
	Active   bool   `json:"active"` // work is in flight
	Kind     string `json:"kind,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Steps    []step `json:"steps,omitempty"`
	Elapsed  string `json:"elapsed,omitempty"`
	State    string `json:"state"` // the Agent's derived state
	Revision int64  `json:"revision,omitempty"`
	Code     string `json:"code,omitempty"` // the last attempt's code
}

type step struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Done  bool   `json:"done"`
	Now   bool   `json:"now"`
}

// activateSteps are the phases of activate work in order (dedicated
// revisions stop their predecessors first).
var activateSteps = []struct{ phase, label string }{
	{wire.PhaseQueued, "queued"},
	{wire.PhaseStopping, "stopping predecessors"},
	{wire.PhasePreparing, "preparing"},
	{wire.PhaseReady, "ready"},
	{wire.PhaseActive, "active"},
}

func progressOf(a wire.AgentOverview, now time.Time) progress {
	p := progress{State: a.State, Revision: a.ActiveRevision}
	w := a.Work
	if w == nil {
		// committed active, but the driver has not reported it ready yet:
		// the state is truthful (activating) and the page keeps listening
		if a.State == wire.AgentActivating {
			p.Active, p.Kind, p.Phase = true, wire.WorkActivate, "observing readiness"
		}
		return p
	}
	p.Active, p.Kind, p.Phase, p.Code = true, w.Kind, w.Phase, w.LastCode
	if p.Phase == "" {
		p.Phase = wire.PhaseQueued
	}
	p.Elapsed = elapsed(now.Sub(w.CreatedAt))
	if w.Kind != wire.WorkActivate {
		return p
	}
	cur := -1
	for i, s := range activateSteps {
		if s.phase == p.Phase {
			cur = i
		}
	}
	for i, s := range activateSteps {
		if s.phase == wire.PhaseStopping && a.ExecutionMode != wire.ModeDedicated && cur != i {
			continue
		}
		p.Steps = append(p.Steps, step{Name: s.phase, Label: s.label, Done: i < cur, Now: i == cur})
	}
	return p
}

func elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// events streams the Agent's progress as server-sent events: one "progress"
// event whenever it changes (at least every second while work is in
// flight, for the elapsed time), then "done" when nothing is in flight.
func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) error {
	fl, ok := w.(http.Flusher)
	if !ok {
		return badRequest("INVALID_REQUEST", "streaming is not supported here")
	}
	ns, name := r.PathValue("ns"), r.PathValue("agent")
	cl := c.apiClient(s.token)
	ctx := r.Context()
	if _, err := cl.AgentOverview(ctx, ns, name); err != nil {
		return apiErr(err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, p progress) bool {
		b, _ := json.Marshal(p)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	tick := time.NewTicker(c.cfg.ProgressInterval)
	defer tick.Stop()
	deadline := time.NewTimer(c.cfg.ProgressMax)
	defer deadline.Stop()
	var last []byte
	lastSent := time.Time{}
	for {
		a, err := cl.AgentOverview(ctx, ns, name)
		if err != nil {
			return nil // the stream ends; the page's script reloads
		}
		p := progressOf(a.AgentOverview, c.cfg.Now())
		b, _ := json.Marshal(p)
		if !p.Active {
			send("done", p)
			return nil
		}
		if string(b) != string(last) || time.Since(lastSent) >= time.Second {
			if !send("progress", p) {
				return nil
			}
			last, lastSent = b, time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
		}
	}
}
