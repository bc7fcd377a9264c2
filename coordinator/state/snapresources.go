package state

import (
	"fmt"
	"maps"
	"slices"
)

// The "resources" snapshot section: Namespace quotas and the Agents' and
// revisions' requests and limits, fields added after version 2 of the
// stored types. A state that sets none writes no section (its bytes and
// Digest stay those of before).

func resourcesEmpty(d *data) bool {
	for _, ns := range d.namespaces {
		if ns.Quota != nil {
			return false
		}
	}
	for _, a := range d.agents {
		if a.Resources != nil {
			return false
		}
	}
	for _, r := range d.revisions {
		if r.Resources != nil {
			return false
		}
	}
	return true
}

func (e *snapEnc) containerResources(c ContainerResources) {
	e.str(c.CPURequest)
	e.str(c.MemoryRequest)
	e.str(c.CPULimit)
	e.str(c.MemoryLimit)
}

func (r *snapDec) containerResources() ContainerResources {
	return ContainerResources{CPURequest: r.sym(), MemoryRequest: r.sym(), CPULimit: r.sym(), MemoryLimit: r.sym()}
}

// resourcesOf encodes every set *AgentResources of m, by ID.
func resourcesOf[T any](e *snapEnc, m map[string]T, get func(T) *AgentResources) {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if get(m[id]) != nil {
			ids = append(ids, id)
		}
	}
	e.uint(uint64(len(ids)))
	for _, id := range ids {
		res := get(m[id])
		e.str(id)
		e.containerResources(res.Gateway)
		e.containerResources(res.Harness)
	}
}

func marshalResources(e *snapEnc, d *data) {
	var quotas []string
	for _, id := range slices.Sorted(maps.Keys(d.namespaces)) {
		if d.namespaces[id].Quota != nil {
			quotas = append(quotas, id)
		}
	}
	e.uint(uint64(len(quotas)))
	for _, id := range quotas {
		q := d.namespaces[id].Quota
		e.str(id)
		e.int(q.Agents)
		e.str(q.CPU)
		e.str(q.Memory)
		e.str(q.Storage)
	}
	resourcesOf(e, d.agents, func(a Agent) *AgentResources { return a.Resources })
	resourcesOf(e, d.revisions, func(r Revision) *AgentResources { return r.Resources })
}

func unmarshalResources(r *snapDec, d *data) {
	for range r.count() {
		id := r.str()
		q := &NamespaceQuota{Agents: r.int(), CPU: r.sym(), Memory: r.sym(), Storage: r.sym()}
		ns, ok := d.namespaces[id]
		if r.err == nil && !ok {
			r.fail(fmt.Errorf("quota of unknown namespace %q", id))
		}
		if r.err != nil {
			return
		}
		ns.Quota = q
		d.namespaces[id] = ns
	}
	loadResources(r, d.agents, "agent", func(a *Agent, res *AgentResources) { a.Resources = res })
	loadResources(r, d.revisions, "revision", func(v *Revision, res *AgentResources) { v.Resources = res })
}

// loadResources reads what resourcesOf wrote into the records of m.
func loadResources[T any](r *snapDec, m map[string]T, kind string, set func(*T, *AgentResources)) {
	for range r.count() {
		id := r.str()
		res := &AgentResources{Gateway: r.containerResources(), Harness: r.containerResources()}
		v, ok := m[id]
		if r.err == nil && !ok {
			r.fail(fmt.Errorf("resources of unknown %s %q", kind, id))
		}
		if r.err != nil {
			return
		}
		set(&v, res)
		m[id] = v
	}
}
