package api

import (
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/codes"
)

// MaxSnapshotBytes bounds a restore upload.
const MaxSnapshotBytes = 1 << 30

func (s *server) cluster(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.ViewCluster, iam.ClusterRes(), ""); err != nil {
		return err
	}
	return s.writeCluster(w, r)
}

func (s *server) writeCluster(w http.ResponseWriter, r *http.Request) error {
	cl, err := s.clusterInfo(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cl)
	return nil
}

func (s *server) clusterInfo(r *http.Request) (wire.Cluster, error) {
	info, err := s.b.Cluster(r.Context())
	if err != nil {
		return wire.Cluster{}, err
	}
	cl, err := wireCluster(info)
	if q, ok := s.b.(Quiescer); ok && err == nil {
		cl.Quiescent = q.Quiescent()
	}
	return cl, err
}

// Quiescer is optionally implemented by a Backend that runs the activation
// engine: Quiescent reports that this node leads and its engine writes
// nothing more until a request or a changed observation (engine.Quiescent).
type Quiescer interface {
	Quiescent() bool
}

func (s *server) clusterJoin(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClusterJoin
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ""); err != nil {
		return err
	}
	if req.ID == "" || req.RaftAddr == "" || req.HTTPAddr == "" {
		return invalid("id, raftAddr and httpAddr are required")
	}
	if err := s.b.Join(r.Context(), req.ID, req.RaftAddr, req.HTTPAddr); err != nil {
		return err
	}
	s.auditSuccess(r, "oce.cluster.join", iam.ClusterRes(), map[string]string{"member": req.ID, "raftAddr": req.RaftAddr})
	return s.writeCluster(w, r)
}

func (s *server) clusterRemove(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClusterMember
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ""); err != nil {
		return err
	}
	if req.ID == "" {
		return invalid("id is required")
	}
	if err := s.b.Remove(r.Context(), req.ID); err != nil {
		return err
	}
	s.auditSuccess(r, "oce.cluster.remove", iam.ClusterRes(), map[string]string{"member": req.ID})
	return s.writeCluster(w, r)
}

func (s *server) clusterTransfer(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClusterMember
	if err := s.decodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ""); err != nil {
		return err
	}
	// The record goes first, once the target is known to be a voter: after
	// the transfer this node no longer leads and cannot write it.
	if err := s.transferTarget(r, req.ID); err != nil {
		return err
	}
	s.auditSuccess(r, "oce.cluster.transfer.request", iam.ClusterRes(), map[string]string{"member": req.ID})
	if err := s.b.TransferLeadership(r.Context(), req.ID); err != nil {
		return err
	}
	return s.writeCluster(w, r)
}

// clusterSnapshot streams a backup of the replicated state.
func (s *server) clusterSnapshot(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ""); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="oce-snapshot"`)
	sw := &lazyWriter{w: w}
	if err := s.b.SnapshotSave(r.Context(), sw); err != nil {
		if sw.started {
			// Headers are gone; abort the stream so the client sees a
			// truncated body rather than a silent success.
			panic(http.ErrAbortHandler)
		}
		return err
	}
	if !sw.started {
		w.WriteHeader(http.StatusOK)
	}
	return nil
}

func (s *server) clusterRestore(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ""); err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, MaxSnapshotBytes)
	if err := s.b.SnapshotRestore(r.Context(), body); err != nil {
		return err
	}
	// The restored state keeps its own audit log; this record joins it.
	s.auditSuccess(r, "oce.cluster.restore", iam.ClusterRes(), nil)
	return s.writeCluster(w, r)
}

// lazyWriter defers the 200 until the first byte so an early error can
// still answer with an error envelope.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.started = true
	return l.w.Write(p)
}

// transferTarget refuses a transfer to a member that is not another voter
// (or, without one named, a cluster without another voter).
func (s *server) transferTarget(r *http.Request, id string) error {
	cl, err := s.clusterInfo(r)
	if err != nil {
		return err
	}
	others := 0
	for _, m := range cl.Members {
		if m.ID == cl.NodeID || m.Suffrage != "voter" {
			continue
		}
		if id == "" || m.ID == id {
			others++
		}
	}
	if others == 0 {
		return &Error{Status: http.StatusBadRequest, Code: codes.InvalidRequest,
			Message: "no other voter to transfer leadership to", Details: map[string]any{"reason": codes.InvalidMember}}
	}
	return nil
}
