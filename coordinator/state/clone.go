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
	return c
}

func cloneAgent(a Agent) Agent {
	a.HarnessAuth = cloneAuth(a.HarnessAuth)
	a.Plugins = cloneStrings(a.Plugins)
	return a
}

func cloneRevision(r Revision) Revision {
	r.Document = cloneRaw(r.Document)
	r.HarnessAuth = cloneAuth(r.HarnessAuth)
	r.Plugins = cloneStrings(r.Plugins)
	return r
}

func cloneAudit(a AuditRecord) AuditRecord {
	a.Details = maps.Clone(a.Details)
	return a
}
