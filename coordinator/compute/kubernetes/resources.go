package kubernetes

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// The runtime containers' default requests and limits (compute's: the
// quotas count the same values).
var (
	DefaultGatewayResources = compute.DefaultGatewayResources
	DefaultHarnessResources = compute.DefaultHarnessResources
)

// The init container's requests and limits (it makes a few directories).
const (
	initCPU         = "10m"
	initMemory      = "16Mi"
	initCPULimit    = "100m"
	initMemoryLimit = "64Mi"
)

// GatewayResources and HarnessResources are the requests and limits a
// revision's containers get: its frozen values over the defaults.
var (
	GatewayResources = compute.GatewayResources
	HarnessResources = compute.HarnessResources
)

// requirements renders c; a malformed quantity (admission validates them)
// fails preparation closed.
func requirements(c state.ContainerResources) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	out.Requests, out.Limits = corev1.ResourceList{}, corev1.ResourceList{}
	for _, f := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		v    string
	}{{out.Requests, corev1.ResourceCPU, c.CPURequest}, {out.Requests, corev1.ResourceMemory, c.MemoryRequest},
		{out.Limits, corev1.ResourceCPU, c.CPULimit}, {out.Limits, corev1.ResourceMemory, c.MemoryLimit}} {
		q, err := resource.ParseQuantity(f.v)
		if err != nil {
			return out, compute.Permanent(codes.InvalidTarget, fmt.Errorf("%w: %s %q: %w", ErrInvalidTarget, f.name, f.v, err))
		}
		f.list[f.name] = q
	}
	return out, nil
}

// initRequirements are the init container's.
func initRequirements() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(initCPU), corev1.ResourceMemory: resource.MustParse(initMemory)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(initCPULimit), corev1.ResourceMemory: resource.MustParse(initMemoryLimit)},
	}
}
