package api_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
)

// valueSpy records every log entry and log line, to prove a credential value
// reaches neither.
type valueSpy struct {
	mu      sync.Mutex
	entries [][]byte
	logs    lockedBuffer
}

func (v *valueSpy) entry(b []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.entries = append(v.entries, bytes.Clone(b))
}

func (v *valueSpy) requireAbsent(t *testing.T, e *env, values ...string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	snap, err := e.b.M.MarshalSnapshot()
	require.NoError(t, err)
	for _, val := range values {
		for _, b := range v.entries {
			require.NotContains(t, string(b), val, "a value reached the Raft log")
		}
		require.NotContains(t, string(snap), val, "a value reached the replicated state")
		require.NotContains(t, v.logs.String(), val, "a value reached the API's log")
	}
}

func credEnv(t *testing.T) (*env, *valueSpy, *memory.Driver) {
	spy := &valueSpy{}
	e := newEnv(t, func(c *api.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&spy.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.b.EntryHook = spy.entry
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team"})
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "other"})
	d, ok := e.b.Driver().(*memory.Driver)
	require.True(t, ok)
	return e, spy, d
}

const credPath = "/v1/namespaces/team/credentials"

// TestCredentialSourceLifecycle: create, list, get, rotate and withdraw a
// source; its value goes to the compute driver's store of its Namespace
// only, is never answered, logged or replicated; every change is audited
// with its actor; bad requests change nothing.
func TestCredentialSourceLifecycle(t *testing.T) {
	e, spy, d := credEnv(t)
	const v1, v2 = "sk-lifecycle-value-one", "sk-lifecycle-value-two"
	ns, _ := e.b.M.NamespaceByName("team")

	created := e.expect(201, "POST", credPath, map[string]any{"name": "model", "values": map[string]string{"value": v1}})
	require.Equal(t, "model", created["name"])
	require.Equal(t, []any{"value"}, created["keys"])
	require.Equal(t, float64(1), created["version"])
	require.Equal(t, []any{"credential:model"}, created["references"])
	require.Equal(t, "bootstrap", created["createdBy"])
	stored, version, ok := d.Credential(ns.ID, "model")
	require.True(t, ok, "the value is in the driver's store of team")
	require.Equal(t, int64(1), version)
	require.Equal(t, v1, string(stored["value"]))

	pair := e.expect(201, "POST", credPath, map[string]any{"name": "pair", "values": map[string]string{"b": "sk-pair-b-value", "a": "sk-pair-a-value"}})
	require.Equal(t, []any{"a", "b"}, pair["keys"])
	require.Equal(t, []any{"credential:pair#a", "credential:pair#b"}, pair["references"])

	// a multi-line value (a JSON key file) is a value too
	e.expect(201, "POST", credPath, map[string]any{"name": "json", "values": map[string]string{"value": "{\n  \"k\": \"sk-json\"\r\n}"}})
	e.expect(200, "DELETE", credPath+"/json", nil)

	list := e.expect(200, "GET", credPath, nil)["items"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, "model", list[0].(map[string]any)["name"])
	require.Empty(t, e.expect(200, "GET", "/v1/namespaces/other/credentials", nil)["items"], "a source belongs to its Namespace")
	byID := e.expect(200, "GET", credPath+"/"+created["id"].(string), nil)
	require.Equal(t, "model", byID["name"])

	rotated := e.expect(200, "POST", credPath+"/model/rotate", map[string]any{"values": map[string]string{"value": v2}})
	require.Equal(t, float64(2), rotated["version"])
	require.Equal(t, "bootstrap", rotated["rotatedBy"])
	stored, version, _ = d.Credential(ns.ID, "model")
	require.Equal(t, int64(2), version)
	require.Equal(t, v2, string(stored["value"]))

	for name, body := range map[string]any{
		"bad name":        map[string]any{"name": "Model", "values": map[string]string{"value": "x"}},
		"no name":         map[string]any{"values": map[string]string{"value": "x"}},
		"no value":        map[string]any{"name": "x"},
		"empty values":    map[string]any{"name": "x", "values": map[string]string{}},
		"empty value":     map[string]any{"name": "x", "values": map[string]string{"value": ""}},
		"both":            map[string]any{"name": "x", "values": map[string]string{"value": "v"}, "from": "memory:x"},
		"bad key":         map[string]any{"name": "x", "values": map[string]string{"../k": "v"}},
		"control char":    map[string]any{"name": "x", "values": map[string]string{"value": "a\x00b"}},
		"too long":        map[string]any{"name": "x", "values": map[string]string{"value": strings.Repeat("v", 16<<10+1)}},
		"unknown field":   map[string]any{"name": "x", "value": "v"},
		"too many keys":   map[string]any{"name": "x", "values": map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1", "f": "1", "g": "1", "h": "1", "i": "1"}},
		"from with space": map[string]any{"name": "x", "from": "memory: x"},
	} {
		t.Run(name, func(t *testing.T) {
			body := e.reject(400, "INVALID_REQUEST", "POST", credPath, body)
			require.NotContains(t, body["error"].(map[string]any)["message"], "a\x00b")
		})
	}
	e.reject(409, "RESOURCE_CONFLICT", "POST", credPath, map[string]any{"name": "model", "values": map[string]string{"value": "x"}})
	_, version, _ = d.Credential(ns.ID, "model")
	require.Equal(t, int64(2), version, "a refused create never overwrites a source's value")
	e.reject(404, "NOT_FOUND", "GET", credPath+"/nope", nil)
	e.reject(404, "NOT_FOUND", "POST", credPath+"/nope/rotate", map[string]any{"values": map[string]string{"value": "x"}})
	e.reject(400, "INVALID_REQUEST", "POST", credPath+"/model/rotate", map[string]any{})
	e.reject(409, "RESOURCE_CONFLICT", "DELETE", "/v1/namespaces/team", nil)
	require.Empty(t, d.CallsOf(memory.OpDeleteNamespace), "refused before the driver removes anything")

	withdrawn := e.expect(200, "DELETE", credPath+"/model", nil)
	require.Equal(t, "model", withdrawn["name"])
	_, _, ok = d.Credential(ns.ID, "model")
	require.False(t, ok, "the value is deleted")
	e.reject(404, "NOT_FOUND", "DELETE", credPath+"/model", nil)

	var actions []string
	for _, r := range e.b.M.Audit(0, 0) {
		if strings.HasPrefix(r.Resource, "CredentialSource::") {
			actions = append(actions, r.Action+" "+r.Resource+" "+r.Actor+" "+r.Outcome)
		}
	}
	require.Equal(t, []string{
		`oce.credentials.create CredentialSource::"team/model" bootstrap success`,
		`oce.credentials.create CredentialSource::"team/pair" bootstrap success`,
		`oce.credentials.create CredentialSource::"team/json" bootstrap success`,
		`oce.credentials.withdraw CredentialSource::"team/json" bootstrap success`,
		`oce.credentials.rotate CredentialSource::"team/model" bootstrap success`,
		`oce.credentials.withdraw CredentialSource::"team/model" bootstrap success`,
	}, actions)
	spy.requireAbsent(t, e, v1, v2, "sk-pair-a-value", "sk-pair-b-value")
}

// TestCredentialRoles: a Namespace's viewers see metadata, its deployers
// may not write, its admins create, rotate and withdraw; registering from a
// location is a cluster admin's; denials are audited with their actor.
func TestCredentialRoles(t *testing.T) {
	e, _, d := credEnv(t)
	vera, dan, ada := e.userToken("vera", "viewer"), e.userToken("dan", "deployer"), e.userToken("ada", "admin")
	d.SetLocation("memory:legacy", map[string][]byte{"k": []byte("sk-legacy-value")})
	as := func(tok string, status int, method, path string, body any) {
		t.Helper()
		st, b := send(t, e.srv.URL, method, path, body, tok)
		require.Equal(t, status, st, "%s %s: %s", method, path, b)
	}
	vals := map[string]any{"name": "model", "values": map[string]string{"value": "sk-roles"}}
	as(vera, 403, "POST", credPath, vals)
	as(dan, 403, "POST", credPath, vals)
	as(ada, 201, "POST", credPath, vals)
	as(vera, 200, "GET", credPath+"/model", nil)
	as(dan, 403, "POST", credPath+"/model/rotate", map[string]any{"values": map[string]string{"value": "x"}})
	as(ada, 200, "POST", credPath+"/model/rotate", map[string]any{"values": map[string]string{"value": "x"}})
	as(ada, 403, "POST", credPath, map[string]any{"name": "legacy", "from": "memory:legacy"})
	as(ada, 403, "POST", credPath+"/model/rotate", map[string]any{"from": "memory:legacy"})
	as(dan, 403, "DELETE", credPath+"/model", nil)
	as(ada, 200, "DELETE", credPath+"/model", nil)
	denied := map[string][]string{}
	for _, r := range e.b.M.Audit(0, 0) {
		if r.Outcome == state.OutcomeDenied {
			denied[r.Actor] = append(denied[r.Actor], r.Details["action"])
		}
	}
	require.Equal(t, map[string][]string{"user:vera": {"CreateCredentialSource"},
		"user:dan": {"CreateCredentialSource", "RotateCredentialSource", "WithdrawCredentialSource"},
		"user:ada": {"RegisterCredentialSource", "RegisterCredentialSource"}}, denied)
}

// TestRegisterCredentialSource: a cluster admin registers a source from a
// location of the driver (the credentials of releases before sources);
// the location is read once and its value copied into the Namespace's
// store; a location that is never a source is refused and audited.
func TestRegisterCredentialSource(t *testing.T) {
	e, spy, d := credEnv(t)
	ns, _ := e.b.M.NamespaceByName("team")
	d.SetLocation("memory:model-keys", map[string][]byte{"good": []byte("sk-register-good"), "bad": []byte("sk-register-bad")})
	d.SetLocation("memory:coordinator-token", nil)
	reg := e.expect(201, "POST", credPath, map[string]any{"name": "model-keys", "from": "memory:model-keys"})
	require.Equal(t, "memory:model-keys", reg["registeredFrom"])
	require.Equal(t, []any{"credential:model-keys#bad", "credential:model-keys#good"}, reg["references"])
	stored, _, ok := d.Credential(ns.ID, "model-keys")
	require.True(t, ok)
	require.Equal(t, "sk-register-good", string(stored["good"]))
	recs := e.b.M.Audit(0, 0)
	require.Equal(t, state.AuditCredentialRegister, recs[len(recs)-1].Action)
	require.Equal(t, "memory:model-keys", recs[len(recs)-1].Details["from"])

	before := e.b.M.DigestWithoutAudit()
	r := e.do("POST", credPath, map[string]any{"name": "stolen", "from": "memory:coordinator-token"})
	require.Equal(t, 403, r.status, "%s", r.body)
	require.Equal(t, "CREDENTIAL_LOCATION_REFUSED", r.json(t)["error"].(map[string]any)["details"].(map[string]any)["reason"])
	require.Equal(t, before, e.b.M.DigestWithoutAudit())
	recs = e.b.M.Audit(0, 0)
	require.Equal(t, state.OutcomeDenied, recs[len(recs)-1].Outcome, "the refused registration is audited")
	require.Equal(t, "CREDENTIAL_LOCATION_REFUSED", recs[len(recs)-1].Details["code"])
	_, _, ok = d.Credential(ns.ID, "stolen")
	require.False(t, ok)
	r = e.do("POST", credPath, map[string]any{"name": "absent", "from": "memory:absent"})
	require.Equal(t, 404, r.status, "%s", r.body)
	spy.requireAbsent(t, e, "sk-register-good", "sk-register-bad")
}

// TestCrossNamespaceReferencesAreRefused: an Agent may not be created or
// updated with a reference into another Namespace, nor deploy one that
// names another Namespace's source or a source its own does not hold —
// even an Agent stored with such a reference before references were
// checked. Each refusal changes nothing but one audit record with its
// actor.
func TestCrossNamespaceReferencesAreRefused(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "other"})
	e.expect(201, "POST", "/v1/namespaces/other/credentials", map[string]any{"name": "theirs", "values": map[string]string{"value": "sk-theirs"}})
	refused := func(status int, reason, method, path string, body any) {
		t.Helper()
		before, n := e.b.M.DigestWithoutAudit(), len(e.b.M.Audit(0, 0))
		r := e.do(method, path, body)
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
		require.Equal(t, reason, r.json(t)["error"].(map[string]any)["details"].(map[string]any)["reason"], "%s", r.body)
		require.Equal(t, before, e.b.M.DigestWithoutAudit(), "nothing but the audit changes")
		recs := e.b.M.Audit(0, 0)
		require.Len(t, recs, n+1)
		require.Equal(t, state.OutcomeDenied, recs[n].Outcome)
		require.Equal(t, "bootstrap", recs[n].Actor)
		require.Equal(t, reason, recs[n].Details["code"])
	}
	auth := func(ref string) map[string]any { return map[string]any{"method": "api_key", "sourceRef": ref} }
	for _, ref := range []string{"credential:other/theirs", "secret://other/theirs#value"} {
		refused(403, "CROSS_NAMESPACE_REFERENCE", "POST", "/v1/namespaces/team/agents",
			map[string]any{"name": "thief", "configuration": "cfg", "harnessAuth": auth(ref)})
		refused(403, "CROSS_NAMESPACE_REFERENCE", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"harnessAuth": auth(ref)})
	}
	// A missing source is the deploy's to refuse: the Agent may name a
	// source created later.
	e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"harnessAuth": auth("credential:later")})
	refused(404, "CREDENTIAL_SOURCE_NOT_FOUND", "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	e.expect(201, "POST", credPath, map[string]any{"name": "later", "values": map[string]string{"value": "sk-later"}})
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)

	// An Agent stored before references were checked.
	team, _ := e.b.M.NamespaceByName("team")
	cfg, _ := e.b.M.ConfigurationByName(team.ID, "cfg")
	_, err := e.b.Apply(state.CmdCreateAgent, state.CreateAgent{ID: "legacy", NamespaceID: team.ID, Name: "legacy",
		ConfigurationID: cfg.ID, HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "secret://other/theirs#value"},
		ServicePrincipalID: "sp-legacy", OwnServicePrincipal: true})
	require.NoError(t, err)
	refused(403, "CROSS_NAMESPACE_REFERENCE", "POST", "/v1/namespaces/team/agents/legacy/deploy", nil)
	acc := e.expect(200, "GET", "/v1/namespaces/team/agents/legacy/access", nil)["actions"].(map[string]any)["DeployAgent"].(map[string]any)
	require.Equal(t, false, acc["allowed"], "the console offers no deploy")
	require.Equal(t, []any{"CROSS_NAMESPACE_REFERENCE"}, acc["reasons"])
}

// TestCredentialWriteFailures: a value the driver could not store commits
// nothing; a value stored whose metadata did not commit is reached by no
// reference, and the retried request (the same Idempotency-Key) completes
// the source; a DELETE of a name without metadata removes such a value.
func TestCredentialWriteFailures(t *testing.T) {
	e, _, d := credEnv(t)
	ns, _ := e.b.M.NamespaceByName("team")
	body := map[string]any{"name": "model", "values": map[string]string{"value": "sk-retry"}}

	d.Fail(memory.OpPutCredential, ns.ID+"/model", 1, nil)
	r := e.do("POST", credPath, body)
	require.Equal(t, 503, r.status, "%s", r.body)
	require.Equal(t, "CREDENTIAL_STORE_UNAVAILABLE", r.json(t)["error"].(map[string]any)["details"].(map[string]any)["reason"])
	_, ok := e.b.M.CredentialSourceByName(ns.ID, "model")
	require.False(t, ok)

	// The value is stored, then the commit fails.
	var fail sync.Once
	e.b.ProposeHook = func(typ string) error {
		var err error
		if typ == state.CmdCreateCredentialSource.Name() {
			fail.Do(func() { err = errors.New("leadership lost") })
		}
		return err
	}
	r = e.send("POST", credPath, body, key("create-model"))
	require.Equal(t, 500, r.status, "%s", r.body)
	_, ok = e.b.M.CredentialSourceByName(ns.ID, "model")
	require.False(t, ok, "no metadata")
	_, _, ok = d.Credential(ns.ID, "model")
	require.True(t, ok, "the value is stored, named by no metadata")
	r = e.send("POST", credPath, body, key("create-model"))
	require.Equal(t, 201, r.status, "the retry completes it: %s", r.body)
	_, ok = e.b.M.CredentialSourceByName(ns.ID, "model")
	require.True(t, ok)

	// An orphaned value goes with a DELETE of its name.
	require.NoError(t, compute.StoreOf(d).PutCredential(context.Background(), ns, "orphan", 1, map[string][]byte{"value": []byte("x")}))
	e.reject(404, "NOT_FOUND", "DELETE", credPath+"/orphan", nil)
	_, _, ok = d.Credential(ns.ID, "orphan")
	require.False(t, ok)

	// A driver that keeps no values refuses every write.
	e.b.SetDriver(storeless{d})
	r = e.do("POST", credPath, map[string]any{"name": "x", "values": map[string]string{"value": "v"}})
	require.Equal(t, 409, r.status, "%s", r.body)
	require.Equal(t, "CREDENTIAL_STORE_UNAVAILABLE", r.json(t)["error"].(map[string]any)["details"].(map[string]any)["reason"])
}

// storeless is a compute driver without a credential store.
type storeless struct{ compute.Driver }
