package status

import (
	"regexp"
)

// PhaseKey is the /status field naming the startup phase running now; it is
// absent once startup ended or a failure is held.
const PhaseKey = "startupPhase"

// SetPhase publishes the startup phase running now (phase.Runner's start
// observer). A name outside the phase-name syntax is ignored.
func (s *Server) SetPhase(name string) {
	if !checkRe.MatchString(name) {
		return
	}
	s.mu.Lock()
	s.phase = name
	s.mu.Unlock()
}

// startingPhase is the phase a not-ready answer names: the one running, only
// while startup runs and nothing is held. Callers hold s.mu.
func (s *Server) startingPhase() string {
	if s.startupEnd || s.held != nil {
		return ""
	}
	return s.phase
}

// PhaseReason is the readiness reason while a startup phase runs:
// "<NotReadyReason>; startup phase <name>". An exec readiness probe prints
// it, so kubelet's probe Event tells the coordinator what the runtime is
// doing without any new path to the Pod.
func PhaseReason(name string) string { return NotReadyReason + "; startup phase " + name }

var phaseReasonRe = regexp.MustCompile(regexp.QuoteMeta(NotReadyReason) + `; startup phase ([a-z][a-z0-9-]{0,63})`)

// ParsePhaseReason finds the first PhaseReason in s and returns its phase.
func ParsePhaseReason(s string) (string, bool) {
	m := phaseReasonRe.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1], true
}
