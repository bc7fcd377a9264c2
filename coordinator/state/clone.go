package state

import (
	"encoding/json"
	"maps"
)

// Deep copies, so callers can never alias the Machine's state.

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}

func cloneAuth(h *HarnessAuth) *HarnessAuth {
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

func cloneConfiguration(c Configuration) Configuration {
	c.Document = cloneRaw(c.Document)
	c.Labels = cloneLabels(c.Labels)
	return c
}

func cloneAgent(a Agent) Agent {
	a.Labels = cloneLabels(a.Labels)
	a.HarnessAuth = cloneAuth(a.HarnessAuth)
	a.Plugins = cloneStrings(a.Plugins)
	a.Resources = cloneResources(a.Resources)
	return a
}

func cloneRevision(r Revision) Revision {
	r.Document = cloneRaw(r.Document)
	r.HarnessAuth = cloneAuth(r.HarnessAuth)
	r.Plugins = cloneStrings(r.Plugins)
	r.Resources = cloneResources(r.Resources)
	return r
}

// cloneResources copies r; an empty one becomes nil (stored alike).
func cloneResources(r *AgentResources) *AgentResources {
	if r.Empty() {
		return nil
	}
	c := *r
	return &c
}

func cloneNamespace(ns Namespace) Namespace {
	ns.Labels = cloneLabels(ns.Labels)
	if ns.Quota.Empty() {
		ns.Quota = nil
	} else {
		q := *ns.Quota
		ns.Quota = &q
	}
	return ns
}

func cloneAudit(a AuditRecord) AuditRecord {
	a.Details = maps.Clone(a.Details)
	return a
}
