package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
)

// The API edge: state types never leave this package as response bodies
// and wire types never reach a command. Every converter copies field by
// field, so a change to either side is a compile error or a failing
// round-trip test (convert_test.go), never a silent contract change.

func wireNamespace(n state.Namespace) wire.Namespace {
	out := wire.Namespace{ID: n.ID, Name: n.Name, CreatedAt: n.CreatedAt, Labels: n.Labels}
	if q := n.Quota; q != nil {
		out.Quota = &wire.NamespaceQuota{Agents: q.Agents, CPU: q.CPU, Memory: q.Memory, Storage: q.Storage}
	}
	return out
}

// stateQuota converts a quota request (all zero: none).
func stateQuota(q wire.NamespaceQuota) *state.NamespaceQuota {
	out := &state.NamespaceQuota{Agents: q.Agents, CPU: q.CPU, Memory: q.Memory, Storage: q.Storage}
	if out.Empty() {
		return nil
	}
	return out
}

func wireContainerResources(c state.ContainerResources) wire.ContainerResources {
	return wire.ContainerResources{CPURequest: c.CPURequest, MemoryRequest: c.MemoryRequest, CPULimit: c.CPULimit, MemoryLimit: c.MemoryLimit}
}

func stateContainerResources(c wire.ContainerResources) state.ContainerResources {
	return state.ContainerResources{CPURequest: c.CPURequest, MemoryRequest: c.MemoryRequest, CPULimit: c.CPULimit, MemoryLimit: c.MemoryLimit}
}

func wireResources(r *state.AgentResources) *wire.AgentResources {
	if r == nil {
		return nil
	}
	return &wire.AgentResources{Gateway: wireContainerResources(r.Gateway), Harness: wireContainerResources(r.Harness)}
}

// stateResources converts a request's resources (nil stays nil: unchanged
// or defaults).
func stateResources(r *wire.AgentResources) *state.AgentResources {
	if r == nil {
		return nil
	}
	return &state.AgentResources{Gateway: stateContainerResources(r.Gateway), Harness: stateContainerResources(r.Harness)}
}

func wireConfiguration(c state.Configuration) wire.Configuration {
	return wire.Configuration{ID: c.ID, NamespaceID: c.NamespaceID, Name: c.Name, Generation: c.Generation,
		Document: c.Document, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Labels: c.Labels}
}

func wireHarnessAuth(a *state.HarnessAuth) *wire.HarnessAuth {
	if a == nil {
		return nil
	}
	return &wire.HarnessAuth{Method: a.Method, CredentialKind: a.CredentialKind, SourceRef: a.SourceRef}
}

// stateHarnessAuth converts a request's binding into the command's.
func stateHarnessAuth(a *wire.HarnessAuth) *state.HarnessAuth {
	if a == nil {
		return nil
	}
	return &state.HarnessAuth{Method: a.Method, CredentialKind: a.CredentialKind, SourceRef: a.SourceRef}
}

func wireAgent(a state.Agent, spName string) wire.Agent {
	return wire.Agent{ID: a.ID, NamespaceID: a.NamespaceID, Name: a.Name, ExecutionMode: a.ExecutionMode,
		ConfigurationID: a.ConfigurationID, HarnessAuth: wireHarnessAuth(a.HarnessAuth), ComputeID: a.ComputeID,
		Plugins: a.Plugins, ActiveRevisionID: a.ActiveRevisionID, RevisionCount: a.RevisionCount,
		Deleting: a.Deleting, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, ServicePrincipal: spName,
		Resources: wireResources(a.Resources), Labels: a.Labels}
}

// wireAgentOf converts an Agent naming its ServicePrincipal, Namespace,
// Configuration and active revision number.
func (s *server) wireAgentOf(a state.Agent) wire.Agent {
	m := s.b.Machine()
	sp, _ := m.ServicePrincipal(a.ServicePrincipalID)
	out := wireAgent(a, sp.Name)
	n := m.NamesOf(a.NamespaceID, "", a.ConfigurationID, a.ActiveRevisionID)
	out.Namespace, out.Configuration, out.ActiveRevision = n.Namespace, n.Configuration, n.Revision
	return out
}

func wireRevision(r state.Revision) wire.Revision {
	return wire.Revision{ID: r.ID, AgentID: r.AgentID, NamespaceID: r.NamespaceID, Number: r.Number,
		Document: r.Document, ConfigurationID: r.ConfigurationID, ConfigurationGeneration: r.ConfigurationGeneration,
		Harness: wire.HarnessIdentity{ID: r.Harness.ID, Version: r.Harness.Version}, Mode: r.Mode,
		ComputeID: r.ComputeID, HarnessAuth: wireHarnessAuth(r.HarnessAuth), Plugins: r.Plugins, Status: r.Status,
		FailureCode: r.FailureCode, FailureDetail: r.FailureDetail, CreatedAt: r.CreatedAt,
		ServicePrincipalID: r.ServicePrincipalID, Resources: wireResources(r.Resources)}
}

func wireWork(w state.Work) wire.Work {
	return wire.Work{ID: w.ID, Kind: w.Kind, NamespaceID: w.NamespaceID, AgentID: w.AgentID, RevisionID: w.RevisionID,
		State: w.State, Phase: w.Phase, Attempts: w.Attempts, MaxAttempts: w.MaxAttempts, AvailableAt: w.AvailableAt,
		Owner: w.Owner, LeaseExpiry: w.LeaseExpiry, LastCode: w.LastCode, LastDetail: w.LastDetail, Actor: w.Actor,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, ActorGroups: w.ActorGroups}
}

// workView converts work naming its Namespace, Agent and revision number
// (while they exist).
func (s *server) workView(w state.Work) wire.Work {
	out := wireWork(w)
	n := s.b.Machine().NamesOf(w.NamespaceID, w.AgentID, "", w.RevisionID)
	out.Namespace, out.Agent, out.Revision = n.Namespace, n.Agent, n.Revision
	return out
}

// auditView converts an audit record naming its Namespace, Agent and
// revision number (while they exist).
func (s *server) auditView(r state.AuditRecord) wire.AuditRecord {
	out := wireAudit(r)
	n := s.b.Machine().NamesOf(r.NamespaceID, r.AgentID, "", r.RevisionID)
	out.Namespace, out.Agent, out.Revision = n.Namespace, n.Agent, n.Revision
	return out
}

func wireAudit(r state.AuditRecord) wire.AuditRecord {
	return wire.AuditRecord{Seq: r.Seq, Time: r.Time, Action: r.Action, Actor: r.Actor, NamespaceID: r.NamespaceID,
		AgentID: r.AgentID, RevisionID: r.RevisionID, Details: r.Details, Resource: r.Resource, Outcome: r.Outcome}
}

// listOf converts a state collection into a wire list (never a null items).
func listOf[S, W any](items []S, conv func(S) W) wire.List[W] {
	out := make([]W, 0, len(items))
	for _, it := range items {
		out = append(out, conv(it))
	}
	return wire.List[W]{Items: out}
}

// byName orders a named collection by name, as clients list it (names are
// unique within a collection).
func byName[T any](l wire.List[T], name func(T) string) wire.List[T] {
	slices.SortFunc(l.Items, func(a, b T) int { return strings.Compare(name(a), name(b)) })
	return l
}

// wireCluster converts the Backend's cluster report. The store defines it
// (the API does not import the store), so it crosses as JSON; a field the
// wire type lacks is an error here rather than a silent drop, and
// coordinator/server's tests hold the two in step.
func wireCluster(info any) (wire.Cluster, error) {
	var out wire.Cluster
	b, err := json.Marshal(info)
	if err != nil {
		return out, fmt.Errorf("api: cluster report: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return out, fmt.Errorf("api: cluster report: %w", err)
	}
	return out, nil
}
