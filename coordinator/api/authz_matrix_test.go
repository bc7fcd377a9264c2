package api_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/state"
)

// The authorization matrix: every route the router registers × every kind
// of caller → the expected status, and on every refusal the state is
// unchanged (a denied write adds exactly its one audit record).

// Callers of the matrix.
const (
	anonymous    = "anonymous"
	viewer       = "viewer"         // vera: viewer of team
	deployer     = "deployer"       // dan: deployer of team
	otherAdmin   = "admin of other" // olga: admin of namespace other
	clusterAdmin = "cluster-admin"  // carl
	metrics      = "metrics-reader" // mia: metrics-reader, the scrape identity
	revoked      = "revoked token"
	expired      = "expired token"
	forgedJWT    = "forged JWT"
	wrongAudJWT  = "JWT for the wrong audience"
)

var callers = []string{anonymous, viewer, deployer, otherAdmin, clusterAdmin, metrics, revoked, expired, forgedJWT, wrongAudJWT}

// authenticated are the callers whose credentials are valid.
var authenticated = map[string]bool{viewer: true, deployer: true, otherAdmin: true, clusterAdmin: true, metrics: true}

// Fixed ids the seed uses, so paths can name them.
const (
	seedWorkID    = "0000000000000000000000000000a001"
	seedTokenID   = "0000000000000000000000000000f001" // a token of user temp
	seedBindingID = "00000000000000000000000000000b01" // vera's viewer binding
)

// matrixRow is one route's expectations.
type matrixRow struct {
	path string // the route's path with its parameters filled
	body func(f *matrixFixture) any
	// allowed lists the authenticated callers that succeed with ok; every
	// other authenticated caller gets denied (403 unless it says otherwise).
	allowed []string
	ok      int
	denied  int
	// except overrides the expectation of single callers.
	except map[string]int
	// check, when set, inspects a successful answer (filtered lists).
	check func(t *testing.T, caller string, body []byte)
	// attempts marks a route that audits every attempt of an identified
	// caller (a workspace document write): a refusal after authorization
	// appends one failure record, nothing else.
	attempts bool
}

var everyone = []string{viewer, deployer, otherAdmin, clusterAdmin, metrics}
var teamReaders = []string{viewer, deployer, clusterAdmin}

func matrixRows() map[string]matrixRow {
	const ns = "/v1/namespaces/team"
	const agent = ns + "/agents/bot"
	doc := json.RawMessage(admission.ExampleEmbeddedAnthropic)
	ca := []string{clusterAdmin}
	return map[string]matrixRow{
		// The metrics-reader reads /metrics and, below, nothing else: every
		// other route refuses it or lists it nothing.
		"GET /metrics": {path: "/metrics", allowed: []string{clusterAdmin, metrics}, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				require.Contains(t, string(body), "# TYPE oce_agents gauge")
			}},

		"GET /v1/namespaces": {path: "/v1/namespaces", allowed: everyone, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				want := map[string][]string{viewer: {"team"}, deployer: {"team"}, otherAdmin: {"other"}, clusterAdmin: {"other", "team"},
					metrics: nil}
				require.ElementsMatch(t, want[caller], names(t, body), "namespaces listed to %s", caller)
			}},
		"POST /v1/namespaces":     {path: "/v1/namespaces", body: obj(`{"name":"fresh"}`), allowed: ca, ok: 201},
		"GET /v1/namespaces/{ns}": {path: ns, allowed: teamReaders, ok: 200},
		// team holds Agents: a cluster admin may ask, and is refused with 409.
		"DELETE /v1/namespaces/{ns}":     {path: ns, allowed: ca, ok: 409},
		"PUT /v1/namespaces/{ns}/quota":  {path: ns + "/quota", body: obj(`{"agents":5,"cpu":"16"}`), allowed: ca, ok: 200},
		"PUT /v1/namespaces/{ns}/labels": {path: ns + "/labels", body: obj(`{"labels":{"team":"a"}}`), allowed: ca, ok: 200},

		"GET /v1/namespaces/{ns}/configurations": {path: ns + "/configurations", allowed: teamReaders, ok: 200},
		"POST /v1/namespaces/{ns}/configurations": {path: ns + "/configurations", allowed: ca, ok: 201,
			body: func(*matrixFixture) any { return map[string]any{"name": "cfg2", "document": doc} }},
		"GET /v1/namespaces/{ns}/configurations/{cfg}": {path: ns + "/configurations/cfg", allowed: teamReaders, ok: 200},
		"PUT /v1/namespaces/{ns}/configurations/{cfg}": {path: ns + "/configurations/cfg", allowed: ca, ok: 200,
			body: func(*matrixFixture) any { return map[string]any{"document": doc} }},
		// bot uses cfg: allowed callers are refused with 409.
		"DELETE /v1/namespaces/{ns}/configurations/{cfg}": {path: ns + "/configurations/cfg", allowed: ca, ok: 409},
		"PUT /v1/namespaces/{ns}/configurations/{cfg}/labels": {path: ns + "/configurations/cfg/labels", allowed: ca, ok: 200,
			body: obj(`{"labels":{"team":"a"}}`)},

		"GET /v1/namespaces/{ns}/agents": {path: ns + "/agents", allowed: teamReaders, ok: 200},
		"POST /v1/namespaces/{ns}/agents": {path: ns + "/agents", allowed: ca, ok: 201,
			body: obj(`{"name":"bot2","configuration":"cfg"}`)},
		"GET /v1/namespaces/{ns}/agents/{agent}":    {path: agent, allowed: teamReaders, ok: 200},
		"PATCH /v1/namespaces/{ns}/agents/{agent}":  {path: agent, body: obj(`{"plugins":["p1"]}`), allowed: ca, ok: 200},
		"DELETE /v1/namespaces/{ns}/agents/{agent}": {path: agent, allowed: ca, ok: 202},
		"PUT /v1/namespaces/{ns}/agents/{agent}/labels": {path: agent + "/labels", body: obj(`{"labels":{"team":"a"}}`),
			allowed: ca, ok: 200},
		"POST /v1/namespaces/{ns}/agents/{agent}/deploy": {path: agent + "/deploy", allowed: []string{deployer, clusterAdmin},
			ok: 202},
		"POST /v1/namespaces/{ns}/agents/{agent}/stop": {path: agent + "/stop", allowed: []string{deployer, clusterAdmin},
			ok: 202},
		"GET /v1/namespaces/{ns}/agents/{agent}/revisions":       {path: agent + "/revisions", allowed: teamReaders, ok: 200},
		"GET /v1/namespaces/{ns}/agents/{agent}/revisions/{rev}": {path: agent + "/revisions/1", allowed: teamReaders, ok: 200},
		"GET /v1/namespaces/{ns}/agents/{agent}/work":            {path: agent + "/work", allowed: teamReaders, ok: 200},
		"GET /v1/namespaces/{ns}/overview":                       {path: ns + "/overview", allowed: teamReaders, ok: 200},
		"GET /v1/namespaces/{ns}/agents/{agent}/overview":        {path: agent + "/overview", allowed: teamReaders, ok: 200},
		"GET /v1/namespaces/{ns}/agents/{agent}/logs":            {path: agent + "/logs", allowed: teamReaders, ok: 404},
		"GET /v1/namespaces/{ns}/agents/{agent}/files":           {path: agent + "/files", allowed: teamReaders, ok: 503},
		"GET /v1/namespaces/{ns}/agents/{agent}/files/{name}":    {path: agent + "/files/AGENTS.md", allowed: teamReaders, ok: 503},
		"GET /v1/namespaces/{ns}/agents/{agent}/files/{path...}": {path: agent + "/files/a/b", allowed: teamReaders, ok: 400},
		"PUT /v1/namespaces/{ns}/agents/{agent}/files/{name}": {path: agent + "/files/AGENTS.md", allowed: ca,
			ok: 503, body: obj(`{"content":"x","force":true}`), attempts: true},
		"PUT /v1/namespaces/{ns}/agents/{agent}/files/{path...}": {path: agent + "/files/a/b", allowed: ca,
			ok: 400, body: obj(`{"content":"x","force":true}`), attempts: true},
		// What the caller may do: decided as the requests themselves are.
		"GET /v1/namespaces/{ns}/access": {path: ns + "/access", allowed: teamReaders, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				acc := access(t, body)
				require.Equal(t, `Namespace::"team"`, acc.Resource)
				require.Equal(t, caller == clusterAdmin, acc.Allowed("CreateAgent"), "CreateAgent for %s", caller)
				require.Equal(t, caller == clusterAdmin, acc.Allowed("CreateConfiguration"), "CreateConfiguration for %s", caller)
			}},
		"GET /v1/namespaces/{ns}/agents/{agent}/access": {path: agent + "/access", allowed: teamReaders, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				acc := access(t, body)
				require.Equal(t, `Agent::"team/bot"`, acc.Resource)
				operate, administer := caller != viewer, caller == clusterAdmin
				require.Equal(t, operate, acc.Allowed("DeployAgent"), "DeployAgent for %s", caller)
				require.Equal(t, operate, acc.Allowed("StopAgent"), "StopAgent for %s", caller)
				require.Equal(t, administer, acc.Allowed("UpdateAgent"), "UpdateAgent for %s", caller)
				require.Equal(t, administer, acc.Allowed("DeleteAgent"), "DeleteAgent for %s", caller)
				if caller == viewer {
					require.Contains(t, acc.Actions["DeployAgent"].Reasons, "no role grants DeployAgent")
				}
			}},
		// The memory driver reports no endpoints: 404 to those who may ask.
		"GET /v1/namespaces/{ns}/agents/{agent}/endpoints": {path: agent + "/endpoints", allowed: teamReaders, ok: 404},
		// A relayed turn is an operator's act (viewers may not talk to the
		// Agent); bot was deployed but never activated: 409 to those who may.
		"POST /v1/namespaces/{ns}/agents/{agent}/messages": {path: agent + "/messages", body: obj(`{"message":"hi"}`),
			allowed: []string{deployer, clusterAdmin}, ok: 409},

		"GET /v1/namespaces/{ns}/serviceprincipals": {path: ns + "/serviceprincipals", allowed: teamReaders, ok: 200},
		"POST /v1/namespaces/{ns}/serviceprincipals": {path: ns + "/serviceprincipals", body: obj(`{"name":"ci2"}`),
			allowed: ca, ok: 201},
		"DELETE /v1/namespaces/{ns}/serviceprincipals/{sp}": {path: ns + "/serviceprincipals/ci", allowed: ca, ok: 200},

		// Credential sources: viewers see metadata; admins (here the
		// cluster admin) write values.
		"GET /v1/namespaces/{ns}/credentials": {path: ns + "/credentials", allowed: teamReaders, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				require.Equal(t, []string{"anthropic"}, names(t, body))
			}},
		"POST /v1/namespaces/{ns}/credentials": {path: ns + "/credentials", allowed: ca, ok: 201,
			body: obj(`{"name":"fresh","values":{"value":"matrix-value"}}`)},
		"GET /v1/namespaces/{ns}/credentials/{cred}": {path: ns + "/credentials/anthropic", allowed: teamReaders, ok: 200},
		"POST /v1/namespaces/{ns}/credentials/{cred}/rotate": {path: ns + "/credentials/anthropic/rotate", allowed: ca, ok: 200,
			body: obj(`{"values":{"key":"matrix-value"}}`)},
		"DELETE /v1/namespaces/{ns}/credentials/{cred}": {path: ns + "/credentials/anthropic", allowed: ca, ok: 200},

		"GET /v1/work": {path: "/v1/work", allowed: everyone, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				n := len(items(t, body))
				if caller == otherAdmin || caller == metrics {
					require.Zero(t, n, "%s sees no work of team", caller)
				} else {
					require.Positive(t, n)
				}
			}},
		"GET /v1/work/{id}": {path: "/v1/work/" + seedWorkID, allowed: teamReaders, ok: 200, denied: 404},
		"GET /v1/audit": {path: "/v1/audit", allowed: everyone, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				if caller == metrics {
					require.Empty(t, items(t, body), "the metrics-reader reads no audit record")
				}
				for _, it := range items(t, body) {
					rec := it.(map[string]any)
					res, _ := rec["resource"].(string)
					switch caller {
					case viewer, deployer:
						require.Contains(t, res, "team", "%s sees only team's records", caller)
					case otherAdmin:
						require.Contains(t, res, "other", "%s sees only other's records", caller)
					}
				}
			}},
		"GET /v1/installation": {path: "/v1/installation", allowed: everyone, ok: 200},
		"GET /v1/version":      {path: "/v1/version", allowed: everyone, ok: 200},
		"GET /v1/index":        {path: "/v1/index", allowed: everyone, ok: 200},
		"GET /v1/status": {path: "/v1/status", allowed: everyone, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				var st map[string]any
				require.NoError(t, json.Unmarshal(body, &st))
				_, hasCluster := st["cluster"]
				require.Equal(t, caller == clusterAdmin, hasCluster, "cluster shown to %s", caller)
			}},
		"GET /v1/whoami": {path: "/v1/whoami", allowed: everyone, ok: 200},

		"GET /v1/users": {path: "/v1/users", allowed: everyone, ok: 200,
			check: func(t *testing.T, caller string, body []byte) {
				if caller != clusterAdmin {
					require.Empty(t, items(t, body))
				}
			}},
		"POST /v1/users":          {path: "/v1/users", body: obj(`{"name":"newbie"}`), allowed: ca, ok: 201},
		"DELETE /v1/users/{user}": {path: "/v1/users/temp", allowed: ca, ok: 200},
		"GET /v1/tokens":          {path: "/v1/tokens", allowed: everyone, ok: 200},
		// Everyone may mint a token for themselves.
		"POST /v1/tokens": {path: "/v1/tokens", body: obj(`{"ttl":"1h"}`), allowed: everyone, ok: 201},
		// A token the caller may not manage is not found.
		"DELETE /v1/tokens/{id}":      {path: "/v1/tokens/" + seedTokenID, allowed: ca, ok: 200, denied: 404},
		"POST /v1/tokens/{id}/rotate": {path: "/v1/tokens/" + seedTokenID + "/rotate", allowed: ca, ok: 201, denied: 404},
		"GET /v1/rolebindings":        {path: "/v1/rolebindings", allowed: everyone, ok: 200},
		"POST /v1/rolebindings": {path: "/v1/rolebindings", allowed: ca, ok: 201,
			body: obj(`{"role":"viewer","namespace":"team","subject":{"kind":"user","name":"zed"}}`)},
		// Team's viewers and deployers see the binding but may not remove
		// it; another namespace's admin does not see it at all.
		"DELETE /v1/rolebindings/{id}": {path: "/v1/rolebindings/" + seedBindingID, allowed: ca, ok: 200,
			except: map[string]int{otherAdmin: 404, metrics: 404}},
		"PUT /v1/rolebindings/{id}/labels": {path: "/v1/rolebindings/" + seedBindingID + "/labels", allowed: ca, ok: 200,
			body: obj(`{"labels":{"team":"a"}}`), except: map[string]int{otherAdmin: 404, metrics: 404}},
		"GET /v1/restrictions":           {path: "/v1/restrictions", allowed: ca, ok: 200},
		"PUT /v1/restrictions/{name}":    {path: "/v1/restrictions/new", body: obj(`{"policy":"forbid (principal, action == Action::\"StopAgent\", resource);"}`), allowed: ca, ok: 201},
		"DELETE /v1/restrictions/{name}": {path: "/v1/restrictions/existing", allowed: ca, ok: 200},

		"GET /v1/cluster": {path: "/v1/cluster", allowed: ca, ok: 200},
		"POST /v1/cluster/join": {path: "/v1/cluster/join", allowed: ca, ok: 200,
			body: obj(`{"id":"node-3","raftAddr":"127.0.0.1:7421","httpAddr":"127.0.0.1:7420"}`)},
		"POST /v1/cluster/remove":   {path: "/v1/cluster/remove", body: obj(`{"id":"node-2"}`), allowed: ca, ok: 200},
		"POST /v1/cluster/transfer": {path: "/v1/cluster/transfer", body: obj(`{"id":"node-2"}`), allowed: ca, ok: 200},
		"GET /v1/cluster/snapshot":  {path: "/v1/cluster/snapshot", allowed: ca, ok: 200},
		"POST /v1/cluster/restore": {path: "/v1/cluster/restore", allowed: ca, ok: 200,
			body: func(f *matrixFixture) any { return string(f.snapshot) }},
	}
}

func obj(s string) func(*matrixFixture) any { return func(*matrixFixture) any { return s } }

func items(t *testing.T, body []byte) []any {
	t.Helper()
	var l struct {
		Items []any `json:"items"`
	}
	require.NoError(t, json.Unmarshal(body, &l), string(body))
	return l.Items
}

func names(t *testing.T, body []byte) []string {
	var out []string
	for _, it := range items(t, body) {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return out
}

// credentials are minted once; each case seeds a fresh state with their
// hashes.
type credentials struct {
	tokens map[string]authn.Minted // by caller, plus "temp"
	jwts   map[string]string
	issuer *oidctest.Issuer
	oidc   *authn.OIDC
}

func newCredentials(t *testing.T) *credentials {
	c := &credentials{tokens: map[string]authn.Minted{}, jwts: map[string]string{}}
	for _, k := range []string{viewer, deployer, otherAdmin, clusterAdmin, metrics, revoked, expired, "temp"} {
		m, err := authn.Mint()
		require.NoError(t, err)
		c.tokens[k] = m
	}
	// The temp token's id is fixed so routes can name it.
	tm := c.tokens["temp"]
	tm.ID = seedTokenID
	c.tokens["temp"] = tm
	is, err := oidctest.New("oce-matrix")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	c.issuer = is
	c.oidc, err = authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-matrix"})
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	c.jwts[forgedJWT], err = oidctest.SignWith(key, is.CurrentKeyID(), map[string]any{"iss": is.URL(), "aud": "oce-matrix",
		"sub": "mallory", "groups": []string{"admins"}, "exp": time.Now().Add(time.Hour).Unix()})
	require.NoError(t, err)
	c.jwts[wrongAudJWT], err = is.Sign(oidctest.Claims{Subject: "mallory", Audience: "someone-else", Groups: []string{"admins"}})
	require.NoError(t, err)
	return c
}

// bearer is the Authorization header of a caller ("" for anonymous).
func (c *credentials) bearer(caller string) string {
	if j, ok := c.jwts[caller]; ok {
		return j
	}
	if m, ok := c.tokens[caller]; ok {
		return m.Token
	}
	return ""
}

type matrixFixture struct {
	b        *apitest.Backend
	srv      *httptest.Server
	snapshot []byte
}

// seed builds the shared starting state: namespaces team and other, each
// with Configuration cfg and Agent bot (team's deployed once), a spare
// service principal, users with role bindings and tokens, an OIDC group
// binding that must not help forged or misaddressed JWTs, a Restriction and
// a second cluster member.
func newMatrixFixture(t *testing.T, c *credentials) *matrixFixture {
	b := apitest.New()
	must := func(typ state.Named, p any) any {
		t.Helper()
		res, err := b.Apply(typ, p)
		require.NoError(t, err, typ)
		return res
	}
	now := time.Now()
	doc := json.RawMessage(admission.ExampleEmbeddedAnthropic)
	auth := &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://team/anthropic#key"}
	for _, ns := range []string{"team", "other"} {
		must(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns-" + ns, Name: ns})
		must(state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "k-" + ns, NamespaceID: "ns-" + ns, Name: "anthropic", Keys: []string{"key"}})
		must(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg-" + ns, NamespaceID: "ns-" + ns, Name: "cfg", Document: doc})
		must(state.CmdCreateAgent, state.CreateAgent{ID: "agent-" + ns, NamespaceID: "ns-" + ns, Name: "bot",
			ConfigurationID: "cfg-" + ns, HarnessAuth: auth, ServicePrincipalID: "sp-" + ns, OwnServicePrincipal: true})
	}
	must(state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: "sp-ci", NamespaceID: "ns-team", Name: "ci"})
	cfg, _ := b.M.Configuration("cfg-team")
	out, err := admission.Admit(admission.Input{Agent: mustAgent(t, b, "agent-team"), Configuration: cfg})
	require.NoError(t, err)
	must(state.CmdAdmitRevision, state.AdmitRevision{WorkID: seedWorkID, Revision: state.Revision{ID: "rev-1",
		AgentID: "agent-team", NamespaceID: "ns-team", Document: out.Document, ConfigurationID: "cfg-team",
		ConfigurationGeneration: 1, Harness: out.Harness, Mode: out.Mode, ComputeID: "memory", HarnessAuth: auth,
		ServicePrincipalID: "sp-team"}})
	users := map[string]string{viewer: "vera", deployer: "dan", otherAdmin: "olga", clusterAdmin: "carl",
		metrics: "mia", revoked: "rex", expired: "eve", "temp": "temp"}
	for caller, name := range users {
		must(state.CmdCreateUser, state.CreateUser{ID: "u-" + name, Name: name})
		exp := now.Add(time.Hour)
		if caller == expired {
			exp = now.Add(2 * time.Minute) // the authenticator's clock runs 10 minutes ahead
		}
		tk := c.tokens[caller]
		must(state.CmdCreateToken, state.CreateToken{ID: tk.ID, PrincipalKind: state.PrincipalUser,
			PrincipalID: "u-" + name, Hash: tk.Hash, ExpiresAt: exp})
	}
	must(state.CmdRevokeToken, state.RevokeToken{TokenID: c.tokens[revoked].ID})
	bind := func(id, role, ns, kind, subject string) {
		must(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: id, Role: role, NamespaceID: ns, SubjectKind: kind, Subject: subject})
	}
	bind(seedBindingID, state.RoleViewer, "ns-team", state.PrincipalUser, "vera")
	bind("b-dan", state.RoleDeployer, "ns-team", state.PrincipalUser, "dan")
	bind("b-olga", state.RoleAdmin, "ns-other", state.PrincipalUser, "olga")
	bind("b-carl", state.RoleClusterAdmin, "", state.PrincipalUser, "carl")
	bind("b-mia", state.RoleMetricsReader, "", state.PrincipalUser, "mia")
	// The revoked and expired tokens' users were admins: only the token
	// keeps them out.
	bind("b-rex", state.RoleClusterAdmin, "", state.PrincipalUser, "rex")
	bind("b-eve", state.RoleClusterAdmin, "", state.PrincipalUser, "eve")
	// A forged or misaddressed JWT claiming group admins must not get this.
	bind("b-oidc", state.RoleClusterAdmin, "", state.SubjectGroup, "oidc:admins")
	must(state.CmdPutRestriction, state.PutRestriction{ID: "r-existing", Name: "existing",
		Policy: `forbid (principal, action == Action::"DeployAgent", resource) when { context.harness == "codex" };`})
	require.NoError(t, b.Join(t.Context(), "node-2", "127.0.0.1:7411", "127.0.0.1:7410"))
	var snap bytes.Buffer
	require.NoError(t, b.SnapshotSave(t.Context(), &snap))

	authr := authn.New(authn.Config{Bootstrap: "matrix-bootstrap-token", Machine: b.M, OIDC: c.oidc,
		Clock: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	srv := httptest.NewServer(api.New(api.Config{Authenticator: authr, Metrics: prometheus.NewRegistry(),
		WithActor: apitest.WithActor}, b))
	t.Cleanup(srv.Close)
	return &matrixFixture{b: b, srv: srv, snapshot: snap.Bytes()}
}

func mustAgent(t *testing.T, b *apitest.Backend, id string) state.Agent {
	a, ok := b.M.Agent(id)
	require.True(t, ok)
	return a
}

func TestAuthorizationMatrix(t *testing.T) {
	rows := matrixRows()
	routes := api.Routes()
	require.NotEmpty(t, routes)
	registered := map[string]bool{}
	for _, r := range routes {
		registered[r.Pattern] = true
		_, ok := rows[r.Pattern]
		require.True(t, ok, "route %s has no row in the authorization matrix", r.Pattern)
	}
	for p := range rows {
		require.True(t, registered[p], "matrix row %s names no registered route", p)
	}
	creds := newCredentials(t)
	for _, r := range routes {
		row := rows[r.Pattern]
		method, _, _ := strings.Cut(r.Pattern, " ")
		for _, caller := range callers {
			t.Run(r.Pattern+"/"+caller, func(t *testing.T) {
				f := newMatrixFixture(t, creds)
				want := row.ok
				switch {
				case !authenticated[caller]:
					want = http.StatusUnauthorized
				case !contains(row.allowed, caller):
					want = row.denied
					if want == 0 {
						want = http.StatusForbidden
					}
				}
				if s, ok := row.except[caller]; ok && authenticated[caller] {
					want = s
				}
				before, beforeAudit := f.b.M.DigestWithoutAudit(), f.b.M.Digest()
				auditLen := len(f.b.M.Audit(0, 0))
				var body any
				if row.body != nil {
					body = row.body(f)
				}
				status, resp := send(t, f.srv.URL, method, row.path, body, creds.bearer(caller))
				require.Equal(t, want, status, "%s %s as %s: %s", method, row.path, caller, resp)
				if status < 300 && row.check != nil {
					row.check(t, caller, resp)
				}
				if status < 400 {
					return
				}
				require.Equal(t, before, f.b.M.DigestWithoutAudit(), "a refused request changed the state")
				au := f.b.M.Audit(0, 0)
				if row.attempts && authenticated[caller] && status != http.StatusForbidden {
					require.Len(t, au, auditLen+1, "a refused attempt appends one audit record")
					rec := au[len(au)-1]
					require.Equal(t, state.OutcomeFailure, rec.Outcome)
					require.Equal(t, "user:carl", rec.Actor)
					require.Equal(t, `Agent::"team/bot"`, rec.Resource)
					require.Equal(t, "agent-team", rec.AgentID)
					return
				}
				if status == http.StatusForbidden && method != http.MethodGet {
					// A denied write: exactly one audit record, with the actor,
					// the action, the resource and the outcome.
					require.Len(t, au, auditLen+1, "a denied write appends one audit record")
					rec := au[len(au)-1]
					require.Equal(t, state.OutcomeDenied, rec.Outcome)
					require.True(t, strings.HasPrefix(rec.Actor, "user:"), rec.Actor)
					require.NotEmpty(t, rec.Resource)
					require.NotEmpty(t, rec.Action)
					var eb struct {
						Error struct {
							Code    string
							Details map[string]any
						}
					}
					require.NoError(t, json.Unmarshal(resp, &eb))
					require.Equal(t, "FORBIDDEN", eb.Error.Code)
					require.NotEmpty(t, eb.Error.Details["action"])
					require.Equal(t, rec.Resource, eb.Error.Details["resource"])
					return
				}
				require.Equal(t, beforeAudit, f.b.M.Digest(), "a refused read or an unauthenticated request changed nothing")
			})
		}
	}
}

func access(t *testing.T, body []byte) wire.Access {
	t.Helper()
	var acc wire.Access
	require.NoError(t, json.Unmarshal(body, &acc))
	return acc
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// send makes one request; a string body is sent verbatim.
func send(t *testing.T, base, method, path string, body any, token string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		b, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b
}
