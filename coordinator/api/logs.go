package api

import (
	"errors"
	"net/http"
	"strconv"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// maxLogTail bounds ?tail=.
const maxLogTail = 100000

// logs streams a revision's supervisor log as text through the compute
// driver: ?container=gateway|harness (default gateway), ?follow=true keeps
// streaming until the client goes, ?tail=N the last N lines first,
// ?revision= an id or number (default: the active revision, else the
// newest).
func (s *server) logs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "container" && k != "follow" && k != "tail" && k != "revision" {
			return invalid("unknown query parameter %q", k)
		}
	}
	opts := compute.LogOptions{Container: q.Get("container")}
	switch opts.Container {
	case "":
		opts.Container = compute.ContainerGateway
	case compute.ContainerGateway, compute.ContainerHarness:
	default:
		return invalid("container %q is not one of gateway, harness", opts.Container)
	}
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			return invalid("follow must be true or false")
		}
		opts.Follow = f
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxLogTail {
			return invalid("tail must be an integer between 0 and %d", maxLogTail)
		}
		opts.Tail = n
	}
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	rev, err := s.logRevision(a, q.Get("revision"))
	if err != nil {
		return err
	}
	lr, ok := s.b.Driver().(compute.LogReader)
	if !ok {
		return notFound("the compute driver serves no logs")
	}
	fw := &flushWriter{w: w}
	err = lr.Logs(r.Context(), rev, opts, fw)
	switch {
	case errors.Is(err, compute.ErrNoLogs) && !fw.started:
		return notFound("%v", err)
	case err != nil && !fw.started:
		return err
	case err != nil:
		s.log.Warn("log stream ended", "agent", a.ID, "error", err.Error())
	}
	return nil
}

// logRevision picks the revision ref names, else the active one, else the
// newest.
func (s *server) logRevision(a state.Agent, ref string) (state.Revision, error) {
	m := s.b.Machine()
	revs := m.Revisions(a.ID)
	for _, rev := range revs {
		if ref != "" && (rev.ID == ref || formatInt(rev.Number) == ref) || ref == "" && rev.ID == a.ActiveRevisionID {
			return rev, nil
		}
	}
	if ref == "" && len(revs) > 0 {
		return revs[len(revs)-1], nil
	}
	if ref == "" {
		return state.Revision{}, notFound("agent %q has no revision yet: deploy it first", a.Name)
	}
	return state.Revision{}, notFound("revision %q not found for agent %q", ref, a.Name)
}

// flushWriter sends every write at once (a followed log is read as it
// grows) and starts the 200 with the first byte, so an early error can
// still answer with an error envelope.
type flushWriter struct {
	w       http.ResponseWriter
	started bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.started {
		f.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		f.w.Header().Set("Cache-Control", "no-store")
		f.started = true
	}
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
