package kubernetes

import "oce.dev/oce/coordinator/compute"

// ActivationRequestBudget is the API requests one embedded activation is
// budgeted: the 41 BenchmarkActivationRequests counts, and headroom for its
// readiness passes and the health watcher. At the default 50 requests/s a
// driver starts about one activation a second; a larger storm waits in the
// replicated work queue, not in the client's rate limiter (issue 27: 256
// activations at once each waited behind the others' requests until their
// convergence window ran out).
const ActivationRequestBudget = 45

var _ compute.Admitter = (*Driver)(nil)

// AdmissionRate implements compute.Admitter: the client's rate spread over
// the activation budget, with a burst of two seconds' worth (at least one).
func (d *Driver) AdmissionRate() (float64, int) {
	if d.cfg.ClientQPS <= 0 {
		return 0, 0
	}
	burst := max(1, int(2*d.cfg.ClientQPS)/ActivationRequestBudget)
	return d.cfg.ClientQPS / ActivationRequestBudget, burst
}
