package api

import (
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/codes"
)

// livez answers 200 while the process serves HTTP.
func (s *server) livez(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when a leader is known and, for a Readier backend, this
// member is ready: a member of the cluster, not replaying its log, and
// within a bounded lag of the leader's commit index (store.Ready).
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.b.IsLeader() && s.b.LeaderHTTPAddr() == "" {
		writeError(w, notLeader(""))
		return
	}
	if rd, ok := s.b.(Readier); ok {
		if err := rd.Ready(r.Context()); err != nil {
			writeError(w, &Error{Status: http.StatusServiceUnavailable, Code: codes.NotReady, Message: err.Error()})
			return
		}
	}
	out := map[string]any{"status": "ready", "leader": s.b.IsLeader()}
	if pos, ok := s.b.(Positions); ok {
		out["appliedIndex"] = pos.AppliedIndex()
		if c, ok := pos.LeaderCommit(); ok {
			out["leaderCommit"] = c
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// version reports the coordinator's build.
func (s *server) version(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.ViewInstallation, iam.ClusterRes(), ""); err != nil {
		return err
	}
	b := s.cfg.Build
	writeJSON(w, http.StatusOK, wire.Version{Version: b.Version, Commit: b.Commit, Modified: b.Modified,
		GoVersion: b.GoVersion, Runtimes: wire.Runtimes{Node: b.Runtimes.Node, OpenClaw: b.Runtimes.OpenClaw,
			Codex: b.Runtimes.Codex}})
	return nil
}
