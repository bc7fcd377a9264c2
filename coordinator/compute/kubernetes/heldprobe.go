package kubernetes

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"oce.dev/oce/shared/status"
)

// How a held startup failure reaches the coordinator (docs/kubernetes.md,
// "Held failures"): the supervisor's exec readiness probe (`gatewayd
// ready`, `harnessd ready`) prints the held reason ("runtime not ready;
// startup check <check> failed with <CODE>") and kubelet records it in the
// Pod's "Unhealthy" Event ("Readiness probe failed: <output>"). The driver
// reads that Event. The Pod gets no API credential and no new network
// path is opened to it: kubelet, which already runs the probe, is the
// reporter, and the driver needs only list on Events in the namespaces it
// manages.
const (
	eventReasonUnhealthy = "Unhealthy"
	eventSourceKubelet   = "kubelet"
	readinessFailed      = "Readiness probe failed:"
)

// heldFromProbe upgrades a not-ready verdict to a held one when kubelet
// reported, for the Pod's current container instances, a readiness probe
// failure carrying a held reason. A malformed or foreign Event is ignored.
func (d *Driver) heldFromProbe(ctx context.Context, p *corev1.Pod, r Readiness) (Readiness, error) {
	since, ok := containersStarted(p)
	if !ok {
		return r, nil // a container has not started: nothing can be held yet
	}
	sel := fields.Set{"involvedObject.uid": string(p.UID), "reason": eventReasonUnhealthy}.AsSelector().String()
	l, err := d.c.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return Readiness{}, transient(err)
	}
	var newest time.Time
	for _, e := range l.Items {
		if e.InvolvedObject.UID != p.UID || e.InvolvedObject.Kind != "Pod" || e.Reason != eventReasonUnhealthy ||
			(e.Source.Component != eventSourceKubelet && e.ReportingController != eventSourceKubelet) ||
			!strings.HasPrefix(e.Message, readinessFailed) {
			continue
		}
		at := eventTime(e)
		if at.Before(since) || at.Before(newest) {
			continue // an earlier container instance's, or older than one already taken
		}
		if _, code, ok := status.ParseHeldReason(e.Message); ok {
			newest = at
			r = Readiness{Reason: ReasonHeld, Pod: p.Name, HeldCode: code}
		}
	}
	return r, nil
}

// containersStarted returns the latest start time of the Pod's running
// containers; ok is false unless every container runs.
func containersStarted(p *corev1.Pod) (time.Time, bool) {
	var latest time.Time
	if len(p.Status.ContainerStatuses) == 0 {
		return latest, false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return latest, false
		}
		if t := cs.State.Running.StartedAt.Time; t.After(latest) {
			latest = t
		}
	}
	// Event and start times have one-second resolution in the core API.
	return latest.Truncate(time.Second), true
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	}
	return e.FirstTimestamp.Time
}
