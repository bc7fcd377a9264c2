package api

import (
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
)

// MaxSnapshotBytes bounds a restore upload.
const MaxSnapshotBytes = 1 << 30

func (s *server) cluster(w http.ResponseWriter, r *http.Request) error {
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
	return wireCluster(info)
}

func (s *server) clusterJoin(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClusterJoin
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.ID == "" || req.RaftAddr == "" || req.HTTPAddr == "" {
		return invalid("id, raftAddr and httpAddr are required")
	}
	if err := s.b.Join(r.Context(), req.ID, req.RaftAddr, req.HTTPAddr); err != nil {
		return err
	}
	return s.cluster(w, r)
}

func (s *server) clusterRemove(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClusterMember
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.ID == "" {
		return invalid("id is required")
	}
	if err := s.b.Remove(r.Context(), req.ID); err != nil {
		return err
	}
	return s.cluster(w, r)
}

func (s *server) clusterTransfer(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClusterMember
	if err := s.decodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	if err := s.b.TransferLeadership(r.Context(), req.ID); err != nil {
		return err
	}
	return s.cluster(w, r)
}

// clusterSnapshot streams a backup of the replicated state.
func (s *server) clusterSnapshot(w http.ResponseWriter, r *http.Request) error {
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
	body := http.MaxBytesReader(w, r.Body, MaxSnapshotBytes)
	if err := s.b.SnapshotRestore(r.Context(), body); err != nil {
		return err
	}
	return s.cluster(w, r)
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
