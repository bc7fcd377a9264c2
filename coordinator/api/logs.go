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

// logs writes a revision's supervisor log as text through the compute
// driver: ?container=gateway|harness (default gateway), ?tail=N the last N
// lines, ?revision= an id or number (default: the active revision, else
// the newest).
func (s *server) logs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "container" && k != "tail" && k != "revision" {
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
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	err = lr.Logs(r.Context(), rev, opts, w)
	if errors.Is(err, compute.ErrNoLogs) {
		return notFound("%v", err)
	}
	return err
}

// logRevision picks the revision ref names, else the active one, else the
// newest.
func (s *server) logRevision(a state.Agent, ref string) (state.Revision, error) {
	revs := s.b.Machine().Revisions(a.ID)
	for _, rev := range revs {
		if ref != "" && (rev.ID == ref || formatInt(rev.Number) == ref) || ref == "" && rev.ID == a.ActiveRevisionID {
			return rev, nil
		}
	}
	if ref == "" && len(revs) > 0 {
		return revs[len(revs)-1], nil
	}
	if ref == "" {
		return state.Revision{}, notFound("agent %q has no revision", a.Name)
	}
	return state.Revision{}, notFound("revision %q not found for agent %q", ref, a.Name)
}
