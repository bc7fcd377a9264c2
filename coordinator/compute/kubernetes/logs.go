package kubernetes

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

var _ compute.LogReader = (*Driver)(nil)

// Logs implements compute.LogReader with the Pod logs of the revision's
// newest Gateway or Harness Pod (client-go's GetLogs stream).
func (d *Driver) Logs(ctx context.Context, rev state.Revision, opts compute.LogOptions, w io.Writer) error {
	p, err := d.planFor(rev)
	if err != nil {
		return err
	}
	ns, sel, container := p.gw, p.gatewayWantLabels(), "gateway"
	switch {
	case opts.Container == compute.ContainerHarness && p.topo == contract.DedicatedCodex:
		ns, sel, container = p.dp, p.harnessWantLabels(), "harness"
	case opts.Container != compute.ContainerGateway:
		return fmt.Errorf("%w: a %s revision has no %s container", compute.ErrNoLogs, p.topo, opts.Container)
	}
	pods, err := d.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	var newest *corev1.Pod
	for i := range pods.Items {
		if pd := &pods.Items[i]; newest == nil || newest.CreationTimestamp.Before(&pd.CreationTimestamp) {
			newest = pd
		}
	}
	if newest == nil {
		return fmt.Errorf("%w: no %s Pod of revision %s in %s", compute.ErrNoLogs, container, rev.ID, ns)
	}
	lo := &corev1.PodLogOptions{Container: container, Follow: opts.Follow}
	if opts.Tail > 0 {
		lo.TailLines = ptr(int64(opts.Tail))
	}
	rc, err := d.c.CoreV1().Pods(ns).GetLogs(newest.Name, lo).Stream(ctx)
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
