package state

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAgentLookupByName: resolving an Agent by name among 10,000 in
// one Namespace, through the name index (what the API does) and through the
// former scan of the sorted Namespace listing, for comparison.
func BenchmarkAgentLookupByName(b *testing.B) {
	const agents = 10_000
	m := NewMachine()
	apply := func(typ Named, p any) {
		e, err := Encode(typ.Name(), t0, "bench", p)
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

// BenchmarkMintAmongManyTokens: the duplicate-hash check of one mint with
// 20,000 tokens recorded (400 users holding 50 each), through the hash
// index (what Apply does) and through the former scan of every token.
func BenchmarkMintAmongManyTokens(b *testing.B) {
	const users, each = 400, MaxUsableTokens
	d := newData()
	exp := t0.Add(time.Hour)
	for u := range users {
		for i := range each {
			n := u*each + i
			d.ids.putToken(Token{ID: "t" + strconv.Itoa(n), PrincipalKind: PrincipalUser, PrincipalID: "u" + strconv.Itoa(u),
				Hash: fmt.Sprintf("%064x", n), CreatedAt: t0, ExpiresAt: exp})
		}
	}
	probe := fmt.Sprintf("%064x", users*each+1)
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if _, ok := d.ids.tokenByHash[probe]; ok {
				b.Fatal("found")
			}
			if err := d.ids.makeRoomForToken(PrincipalUser, "u7", "", t0); err == nil {
				b.Fatal("u7 is at its bound")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			for _, t := range d.ids.tokens {
				if t.Hash == probe {
					b.Fatal("found")
				}
			}
		}
	})
}

// BenchmarkClaimableAmongManyQueued: the engine's claim scan (ClaimableN,
// asking for its concurrency) with 10,000 activations queued at once — a
// deploy storm waiting for admission — and the fleet's Agents listing the
// health watcher takes every round.
func BenchmarkClaimableAmongManyQueued(b *testing.B) {
	const agents = 10_000
	m := NewMachine()
	apply := func(typ Named, p any) {
		e, err := Encode(typ.Name(), t0, "bench", p)
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
		id := "id-" + strconv.Itoa(i)
		apply(CmdCreateAgent, CreateAgent{ID: id, NamespaceID: "ns", Name: "agent-" + strconv.Itoa(i), ConfigurationID: "cfg", ExecutionMode: ModeEmbedded})
		apply(CmdAdmitRevision, AdmitRevision{Revision: Revision{ID: "r-" + id, AgentID: id, NamespaceID: "ns", ConfigurationID: "cfg",
			ConfigurationGeneration: 1, Mode: ModeEmbedded, Document: []byte(`{}`), Harness: HarnessIdentity{ID: HarnessOpenClaw, Version: "pinned"}}, WorkID: "w-" + id, MaxAttempts: 10})
	}
	// and, for the listing, every Agent serving (set directly: activation
	// is not what is measured)
	for id, a := range m.d.agents {
		a.ActiveRevisionID = "r-" + id
		m.d.agents[id] = a
	}
	now := t0.Add(time.Minute)
	b.Run("claimable", func(b *testing.B) {
		for b.Loop() {
			if len(m.ClaimableN(now, 16)) != 16 {
				b.Fatal("claimable")
			}
		}
	})
	b.Run("agents", func(b *testing.B) { // what the watcher listed before
		for b.Loop() {
			if len(m.Agents("")) != agents {
				b.Fatal("agents")
			}
		}
	})
	b.Run("active-revisions-built", func(b *testing.B) { // what it built every round before the memo
		for b.Loop() {
			m.mu.Lock()
			m.applied++ // as any apply does: the memo is stale
			m.mu.Unlock()
			if len(m.ActiveRevisions()) != agents {
				b.Fatal("active revisions")
			}
		}
	})
	b.Run("active-revisions", func(b *testing.B) { // what it lists now, at rest
		for b.Loop() {
			if len(m.ActiveRevisions()) != agents {
				b.Fatal("active revisions")
			}
		}
	})
}
