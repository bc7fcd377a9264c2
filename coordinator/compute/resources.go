package compute

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// Default requests and limits of the runtime containers, sized from the
// resident memory measured on the real node (docs/PERFORMANCE.md, "Runtime
// memory"): a Gateway (gatewayd + OpenClaw) settles near 1.25 GiB and peaks
// while plugins load; a Codex Harness (harnessd + nodehost + Codex) near
// 0.5 GiB. An Agent overrides any value (state.AgentResources). The
// Kubernetes driver renders them; Namespace quotas count them.
var (
	DefaultGatewayResources = state.ContainerResources{CPURequest: "250m", MemoryRequest: "1792Mi", CPULimit: "2", MemoryLimit: "3Gi"}
	DefaultHarnessResources = state.ContainerResources{CPURequest: "250m", MemoryRequest: "768Mi", CPULimit: "2", MemoryLimit: "2Gi"}
)

// The claims an Agent holds (docs/design/reference.md#s8-4): the Gateway's
// state, and the dedicated Harness's workspace.
const (
	GatewayStateClaimSize = "10Gi"
	WorkspaceClaimSize    = "40Gi"
)

// ResolveResources fills the empty values of c from def.
func ResolveResources(c, def state.ContainerResources) state.ContainerResources {
	pick := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	return state.ContainerResources{CPURequest: pick(c.CPURequest, def.CPURequest), MemoryRequest: pick(c.MemoryRequest, def.MemoryRequest),
		CPULimit: pick(c.CPULimit, def.CPULimit), MemoryLimit: pick(c.MemoryLimit, def.MemoryLimit)}
}

// GatewayResources and HarnessResources are what a revision's containers
// get: its frozen values over the defaults.
func GatewayResources(rev state.Revision) state.ContainerResources {
	var c state.ContainerResources
	if rev.Resources != nil {
		c = rev.Resources.Gateway
	}
	return ResolveResources(c, DefaultGatewayResources)
}

// HarnessResources: see GatewayResources.
func HarnessResources(rev state.Revision) state.ContainerResources {
	var c state.ContainerResources
	if rev.Resources != nil {
		c = rev.Resources.Harness
	}
	return ResolveResources(c, DefaultHarnessResources)
}

// Footprint is what one Agent holds against its Namespace's quota: the
// limits of its containers (millicores, bytes) and its claims (bytes).
type Footprint struct {
	CPUMilli, Memory, Storage int64
}

// Add returns f + o.
func (f Footprint) Add(o Footprint) Footprint {
	return Footprint{CPUMilli: f.CPUMilli + o.CPUMilli, Memory: f.Memory + o.Memory, Storage: f.Storage + o.Storage}
}

// FootprintOf is a revision's footprint: the Gateway's limits, plus the
// Harness's for a dedicated one (it runs its own Pod), and the claims of
// its topology.
func FootprintOf(rev state.Revision) (Footprint, error) {
	containers := []state.ContainerResources{GatewayResources(rev)}
	claims := []string{GatewayStateClaimSize}
	if t, _ := contract.Of(rev.Harness.ID, rev.Mode); t == contract.DedicatedCodex {
		containers = append(containers, HarnessResources(rev))
		claims = append(claims, WorkspaceClaimSize)
	}
	var f Footprint
	for _, c := range containers {
		cpu, err := resource.ParseQuantity(c.CPULimit)
		if err != nil {
			return f, fmt.Errorf("cpu limit %q: %w", c.CPULimit, err)
		}
		mem, err := resource.ParseQuantity(c.MemoryLimit)
		if err != nil {
			return f, fmt.Errorf("memory limit %q: %w", c.MemoryLimit, err)
		}
		f.CPUMilli += cpu.MilliValue()
		f.Memory += mem.Value()
	}
	for _, c := range claims {
		q := resource.MustParse(c)
		f.Storage += q.Value()
	}
	return f, nil
}

// ValidateResources checks an Agent's requests and limits: quantities
// Kubernetes accepts, positive, each request at most its limit (after the
// defaults fill what is unset).
func ValidateResources(r *state.AgentResources) error {
	if r == nil {
		return nil
	}
	for _, part := range []struct {
		name string
		c    state.ContainerResources
		def  state.ContainerResources
	}{{"gateway", r.Gateway, DefaultGatewayResources}, {"harness", r.Harness, DefaultHarnessResources}} {
		c := ResolveResources(part.c, part.def)
		for _, pair := range [][3]string{{"cpu", c.CPURequest, c.CPULimit}, {"memory", c.MemoryRequest, c.MemoryLimit}} {
			req, err := resource.ParseQuantity(pair[1])
			if err != nil || req.Sign() <= 0 {
				return fmt.Errorf("%s %s request %q is not a positive quantity", part.name, pair[0], pair[1])
			}
			lim, err := resource.ParseQuantity(pair[2])
			if err != nil || lim.Sign() <= 0 {
				return fmt.Errorf("%s %s limit %q is not a positive quantity", part.name, pair[0], pair[2])
			}
			if req.Cmp(lim) > 0 {
				return fmt.Errorf("%s %s request %s exceeds its limit %s", part.name, pair[0], pair[1], pair[2])
			}
		}
	}
	return nil
}

// ValidateQuota checks a Namespace quota's quantities.
func ValidateQuota(q *state.NamespaceQuota) error {
	if q == nil {
		return nil
	}
	if q.Agents < 0 {
		return fmt.Errorf("agents %d is negative", q.Agents)
	}
	for name, v := range map[string]string{"cpu": q.CPU, "memory": q.Memory, "storage": q.Storage} {
		if v == "" {
			continue
		}
		if qty, err := resource.ParseQuantity(v); err != nil || qty.Sign() < 0 {
			return fmt.Errorf("%s %q is not a quantity", name, v)
		}
	}
	return nil
}
