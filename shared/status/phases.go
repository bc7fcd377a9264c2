package status

import (
	"sync"

	"oce.dev/oce/shared/phase"
)

// PhasesKey is the status section PhaseObserver publishes.
const PhasesKey = "startupPhases"

// PhaseRecord is one finished startup phase as /status shows it.
type PhaseRecord struct {
	Phase        string `json:"phase"`
	Outcome      string `json:"outcome"`
	Ms           int64  `json:"ms"`
	SinceStartMs int64  `json:"sinceStartMs"`
	Code         string `json:"code,omitempty"`
}

// maxPhaseRecords bounds the published list (respawns and peer changes keep
// adding records for the life of the process).
const maxPhaseRecords = 64

// PhaseObserver returns a function for phase.Runner.Observe that publishes
// the most recent phase records under PhasesKey.
func (s *Server) PhaseObserver() func(phase.Record) {
	var mu sync.Mutex
	var recs []PhaseRecord
	return func(r phase.Record) {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, PhaseRecord{Phase: r.Phase, Outcome: r.Outcome, Ms: r.Ms,
			SinceStartMs: r.SinceStartMs, Code: string(r.Code)})
		if len(recs) > maxPhaseRecords {
			recs = recs[len(recs)-maxPhaseRecords:]
		}
		_ = s.SetStatus(PhasesKey, recs) // a slice of plain structs always encodes
	}
}
