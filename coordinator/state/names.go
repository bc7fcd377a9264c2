package state

// Names: what views show in place of ids, read without copying the
// documents the full reads clone ("" or 0 when the id names nothing).

// Names are the human names of a record's ids.
type Names struct {
	Namespace     string
	Agent         string
	Configuration string
	// Revision is the revision's number.
	Revision int64
}

// NamesOf looks up the names of a Namespace, an Agent, a Configuration and
// a revision by id; an empty or unknown id leaves its name empty.
func (m *Machine) NamesOf(nsID, agentID, configID, revisionID string) Names {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var n Names
	if nsID != "" {
		n.Namespace = m.d.namespaces[nsID].Name
	}
	if agentID != "" {
		n.Agent = m.d.agents[agentID].Name
	}
	if configID != "" {
		n.Configuration = m.d.configurations[configID].Name
	}
	if revisionID != "" {
		n.Revision = m.d.revisions[revisionID].Number
	}
	return n
}
