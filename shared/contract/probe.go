package contract

import "time"

// ModelProbeFreshFor is how long a model probe that passed before cutover
// vouches for the candidate: a gateway started later than this probes again
// at its start (the seeds' order). Activation follows readiness within
// seconds; the bound keeps a restart long after cutover from skipping the
// check it would otherwise make.
const ModelProbeFreshFor = 10 * time.Minute

// ModelProbeStatus is the StatusModelProbe section of a probe-only gatewayd.
type ModelProbeStatus struct {
	Code       string `json:"code"`       // READY once passed
	PassedAtMs int64  `json:"passedAtMs"` // Unix milliseconds
}
