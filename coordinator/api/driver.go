package api

import (
	"slices"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// SandboxHealth is optionally implemented by a compute driver that fronts a
// SandboxDriver; GET /v1/installation reports sandboxDriverUnavailable
// while it answers false.
type SandboxHealth interface {
	SandboxDriverAvailable() bool
}

// driverFacts is what the API reads from the compute driver.
type driverFacts struct {
	present            bool
	caps               compute.Capabilities
	sandboxUnavailable bool
}

// auth converts the driver's per-topology harnessAuth methods for
// admission; without a driver admission uses its Kubernetes default.
func (d driverFacts) auth() admission.AuthSupport {
	if !d.present {
		return nil
	}
	out := admission.AuthSupport{}
	for t, ms := range d.caps.Topologies {
		out[t] = slices.Clone(ms)
	}
	return out
}

func (d driverFacts) authMethods() []string {
	var out []string
	for _, ms := range d.caps.Topologies {
		for _, m := range ms {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// supports reports whether the driver runs (harness, mode); without a
// driver every admission-approved topology counts.
func (d driverFacts) supports(harness, mode string) bool {
	return !d.present || d.caps.SupportsTopology(harness, mode)
}

// driverInfo reads the selected driver's capabilities.
func (s *server) driverInfo() driverFacts {
	drv := s.b.Driver()
	if drv == nil {
		return driverFacts{}
	}
	f := driverFacts{present: true, caps: drv.Capabilities()}
	if h, ok := drv.(SandboxHealth); ok {
		f.sandboxUnavailable = !h.SandboxDriverAvailable()
	}
	return f
}

// computeID picks the revision's compute selection: the Agent's, or the
// driver's name; an Agent naming another driver cannot deploy here.
func (s *server) computeID(a state.Agent) (string, error) {
	d := s.driverInfo()
	if a.ComputeID == "" {
		return d.caps.Name, nil
	}
	if d.present && d.caps.Name != "" && a.ComputeID != d.caps.Name {
		e := conflict("the Agent selects compute %s; this installation's compute driver is %s", a.ComputeID, d.caps.Name)
		e.Details = map[string]any{"computeId": a.ComputeID, "driver": d.caps.Name}
		return "", e
	}
	return a.ComputeID, nil
}
