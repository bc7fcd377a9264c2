package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// OverQuota refuses a deploy that would take its Namespace past one bound
// of its quota (state.NamespaceQuota); the API answers it with
// QUOTA_EXCEEDED.
type OverQuota struct {
	Namespace string // the Namespace's name
	Quota     string // agents | cpu | memory | storage
	Limit     string // the quota's bound
	Used      string // what the Namespace's other Agents hold
	Requested string // what this deploy needs
}

func (e *OverQuota) Error() string {
	return fmt.Sprintf("namespace %q quota %s is %s: its other Agents hold %s and this deploy needs %s", e.Namespace, e.Quota,
		e.Limit, e.Used, e.Requested)
}

// WithinQuota reports whether deploying rev (Agent a's next revision) keeps
// Namespace ns within its quota, else an *OverQuota naming the first bound
// it passes. The other Agents count as the quota says: every Agent deployed
// at least once and not deleted holds its claims (agents, storage); one
// whose revision runs or is being deployed holds its limits (cpu, memory).
// Agent a counts once, with rev's footprint.
func (d Decider) WithinQuota(ns state.Namespace, a state.Agent, rev state.Revision) error {
	q := ns.Quota
	if q.Empty() {
		return nil
	}
	need, err := compute.FootprintOf(rev)
	if err != nil {
		return fmt.Errorf("quota: %w", err)
	}
	var used compute.Footprint
	agents := int64(0)
	for _, other := range d.State.Agents(ns.ID) {
		if other.ID == a.ID || other.RevisionCount == 0 {
			continue
		}
		agents++
		running, ok := d.runningRevision(other)
		if !ok {
			running, _ = d.State.LatestRevision(other.ID)
			running.Resources = nil // stopped: claims only
			f, err := compute.FootprintOf(running)
			if err != nil {
				return fmt.Errorf("quota: %w", err)
			}
			used.Storage += f.Storage
			continue
		}
		f, err := compute.FootprintOf(running)
		if err != nil {
			return fmt.Errorf("quota: %w", err)
		}
		used = used.Add(f)
	}
	over := func(name string, limit string, used, need int64, format func(int64) string) error {
		if limit == "" {
			return nil
		}
		l := resource.MustParse(limit)
		bound := l.Value()
		if name == "cpu" {
			bound = l.MilliValue()
		}
		if used+need > bound {
			return &OverQuota{Namespace: ns.Name, Quota: name, Limit: limit, Used: format(used), Requested: format(need)}
		}
		return nil
	}
	if q.Agents > 0 && agents+1 > q.Agents {
		return &OverQuota{Namespace: ns.Name, Quota: "agents", Limit: fmt.Sprint(q.Agents), Used: fmt.Sprint(agents), Requested: "1"}
	}
	milli := func(v int64) string { return resource.NewMilliQuantity(v, resource.DecimalSI).String() }
	bytes := func(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }
	if err := over("cpu", q.CPU, used.CPUMilli, need.CPUMilli, milli); err != nil {
		return err
	}
	if err := over("memory", q.Memory, used.Memory, need.Memory, bytes); err != nil {
		return err
	}
	return over("storage", q.Storage, used.Storage, need.Storage, bytes)
}

// runningRevision is the revision of Agent a that holds runtime resources:
// the one being deployed (its latest, pending), else the active one.
func (d Decider) runningRevision(a state.Agent) (state.Revision, bool) {
	if latest, ok := d.State.LatestRevision(a.ID); ok && latest.Status == state.RevisionPending {
		return latest, true
	}
	if a.ActiveRevisionID == "" {
		return state.Revision{}, false
	}
	return d.State.Revision(a.ActiveRevisionID)
}
