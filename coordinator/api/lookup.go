package api

import (
	"net/http"

	"oce.dev/oce/coordinator/state"
)

// Path segments {ns} and {agent} (and {cfg}) accept an id or a name; ids
// win when both match.

func (s *server) namespace(r *http.Request) (state.Namespace, error) {
	return s.namespaceRef(r.PathValue("ns"))
}

func (s *server) namespaceRef(ref string) (state.Namespace, error) {
	m := s.b.Machine()
	if ns, ok := m.Namespace(ref); ok {
		return ns, nil
	}
	for _, ns := range m.Namespaces() {
		if ns.Name == ref {
			return ns, nil
		}
	}
	return state.Namespace{}, notFound("namespace %q not found", ref)
}

func (s *server) configurationRef(ns state.Namespace, ref string) (state.Configuration, error) {
	m := s.b.Machine()
	if c, ok := m.Configuration(ref); ok && c.NamespaceID == ns.ID {
		return c, nil
	}
	for _, c := range m.Configurations(ns.ID) {
		if c.Name == ref {
			return c, nil
		}
	}
	return state.Configuration{}, notFound("configuration %q not found in namespace %q", ref, ns.Name)
}

func (s *server) agentRef(ns state.Namespace, ref string) (state.Agent, error) {
	m := s.b.Machine()
	if a, ok := m.Agent(ref); ok && a.NamespaceID == ns.ID {
		return a, nil
	}
	for _, a := range m.Agents(ns.ID) {
		if a.Name == ref {
			return a, nil
		}
	}
	return state.Agent{}, notFound("agent %q not found in namespace %q", ref, ns.Name)
}

// agent resolves {ns} and {agent}.
func (s *server) agent(r *http.Request) (state.Namespace, state.Agent, error) {
	ns, err := s.namespace(r)
	if err != nil {
		return ns, state.Agent{}, err
	}
	a, err := s.agentRef(ns, r.PathValue("agent"))
	return ns, a, err
}
