package state

import (
	"encoding/json"
	"strconv"
	"testing"
)

// BenchmarkAgentLookupByName: resolving an Agent by name among 10,000 in
// one Namespace, through the name index (what the API does) and through the
// former scan of the sorted Namespace listing, for comparison.
func BenchmarkAgentLookupByName(b *testing.B) {
	const agents = 10_000
	m := NewMachine()
	apply := func(typ string, p any) {
		e, err := Encode(typ, t0, "bench", p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.ApplyBytes(e); err != nil {
			b.Fatal(err)
		}
	}
	apply(CmdCreateNamespace, CreateNamespace{ID: "ns", Name: "ns"})
	apply(CmdPutConfiguration, PutConfiguration{ID: "cfg", NamespaceID: "ns", Name: "cfg", Document: json.RawMessage(`{}`)})
	for i := range agents {
		apply(CmdCreateAgent, CreateAgent{ID: "id-" + strconv.Itoa(i), NamespaceID: "ns", Name: "agent-" + strconv.Itoa(i), ConfigurationID: "cfg"})
	}
	b.Run("index", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := m.AgentByName("ns", "agent-"+strconv.Itoa(i%agents)); !ok {
				b.Fatal("not found")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			name, found := "agent-"+strconv.Itoa(i%agents), false
			for _, a := range m.Agents("ns") {
				if a.Name == name {
					found = true
					break
				}
			}
			if !found {
				b.Fatal("not found")
			}
		}
	})
}
