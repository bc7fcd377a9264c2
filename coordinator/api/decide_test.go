package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// decision is one deploy decision as either side reports it: allowed, or
// refused with a code for an action on a resource (or, for a credential
// reference that cannot be used in the Agent's Namespace, with its reason).
type decision struct {
	Allowed  bool
	Code     string
	Action   string
	Resource string
	Policies string
	Reason   string
}

// deployCaller is a principal of the table: how it authenticates to the API
// and the actor (and external groups) the worker's work carries.
type deployCaller struct {
	name   string
	bearer string
	actor  string
	groups []string
}

// TestAPIAndWorkerDecideDeploysAlike: over a table of principals × Agents ×
// the references they use (their ServicePrincipal, own or shared, and their
// credential source), the API's deploy (POST …/deploy) and the engine's
// reauthorization of the same deploy's work (policy.Reauthorizer) allow and
// refuse the same deploys, for the same action on the same resource: a 202
// is a reauthorization that passes, a 403 FORBIDDEN one that fails with
// REAUTHORIZATION_DENIED naming that action and resource, and a reference
// to another Namespace's source (403, reason CROSS_NAMESPACE_REFERENCE) or
// to a source its Namespace does not hold (404, reason
// CREDENTIAL_SOURCE_NOT_FOUND) one that fails with that code — each
// refusal leaving the state as it was but for its audit record.
func TestAPIAndWorkerDecideDeploysAlike(t *testing.T) {
	b := apitest.New()
	ctx := context.Background()
	must := func(cmd state.Named, p any) {
		t.Helper()
		_, err := b.Apply(cmd, p)
		require.NoError(t, err, cmd)
	}
	must(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns-team", Name: "team"})
	must(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns-other", Name: "other"})
	must(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg", NamespaceID: "ns-team", Name: "cfg",
		Document: json.RawMessage(admission.ExampleEmbeddedAnthropic)})
	must(state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: "sp-shared", NamespaceID: "ns-team", Name: "shared"})
	must(state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: "sp-ci", NamespaceID: "ns-team", Name: "ci"})
	source := func(ref string) *state.HarnessAuth {
		return &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: ref}
	}
	// The credential sources: team's, and other's (one of them named
	// like a source team lacks).
	for _, src := range []string{"plain", "key", "locked", "shared", "ctx"} {
		must(state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "k-" + src, NamespaceID: "ns-team", Name: src, Keys: []string{"k"}})
	}
	for _, src := range []string{"theirs", "gone"} {
		must(state.CmdCreateCredentialSource, state.CreateCredentialSource{ID: "k-" + src, NamespaceID: "ns-other", Name: src, Keys: []string{"k"}})
	}
	// The Agents: the resources, with the references each uses (in every
	// spelling; foreign, missing and nokey could only have been stored
	// before references were checked).
	agents := []struct {
		name string
		sp   string // "" owns one
		auth *state.HarnessAuth
	}{
		{name: "plain", auth: source("credential:plain#k")},
		{name: "keyed", auth: source("secret:key#k")},
		{name: "locked", auth: source("credential:team/locked")},
		{name: "shared", sp: "sp-shared", auth: source("secret://team/shared#k")},
		{name: "ctx", auth: source("credential:ctx#k")},
		{name: "foreign", auth: source("credential:other/theirs#k")},
		{name: "missing", auth: source("credential:gone#k")},
		{name: "nokey", auth: source("credential:plain#nope")},
		{name: "legacy", auth: source("local:plain")},
	}
	for _, a := range agents {
		sp, own := a.sp, a.sp == ""
		if own {
			sp = "sp-" + a.name
		}
		must(state.CmdCreateAgent, state.CreateAgent{ID: "a-" + a.name, NamespaceID: "ns-team", Name: a.name,
			ConfigurationID: "cfg", HarnessAuth: a.auth, ServicePrincipalID: sp, OwnServicePrincipal: own})
	}
	bind := func(id, role, ns, kind, subject string) {
		must(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: id, Role: role, NamespaceID: ns, SubjectKind: kind, Subject: subject})
	}
	// Restrictions on each kind of decision: a credential source nobody
	// may use, one group ops may not, a ServicePrincipal nobody may use, and
	// the admitted facts of a deploy.
	for i, p := range []string{
		`forbid (principal, action == Action::"UseCredentialSource", resource == CredentialSource::"team/locked");`,
		`forbid (principal in Group::"ops", action == Action::"UseCredentialSource", resource == CredentialSource::"team/key");`,
		`forbid (principal, action == Action::"UseServicePrincipal", resource == ServicePrincipal::"team/shared");`,
		`forbid (principal, action == Action::"DeployAgent", resource) when { context.credentialSource == "credential:ctx#k" };`,
	} {
		must(state.CmdPutRestriction, state.PutRestriction{ID: fmt.Sprintf("r%d", i), Name: fmt.Sprintf("r%d", i), Policy: p})
	}

	// The principals, each with a bearer token of the API.
	is, err := oidctest.New("oce-decide")
	require.NoError(t, err)
	t.Cleanup(is.Close)
	oidc, err := authn.NewOIDC(authn.OIDCConfig{Issuer: is.URL(), Audience: "oce-decide"})
	require.NoError(t, err)
	callers := []deployCaller{{name: "bootstrap", bearer: "decide-bootstrap-token", actor: iam.BootstrapActor}}
	user := func(name string, groups []string, role, ns, subjectKind, subject string) {
		must(state.CmdCreateUser, state.CreateUser{ID: "u-" + name, Name: name, Groups: groups})
		if role != "" {
			bind("b-"+name, role, ns, subjectKind, subject)
		}
		tk, err := authn.Mint()
		require.NoError(t, err)
		must(state.CmdCreateToken, state.CreateToken{ID: tk.ID, PrincipalKind: state.PrincipalUser, PrincipalID: "u-" + name,
			Hash: tk.Hash, ExpiresAt: time.Now().Add(time.Hour)})
		callers = append(callers, deployCaller{name: name, bearer: tk.Token, actor: "user:" + name})
	}
	user("carl", nil, state.RoleClusterAdmin, "", state.PrincipalUser, "carl")
	user("dan", nil, state.RoleDeployer, "ns-team", state.PrincipalUser, "dan")
	user("gus", []string{"ops"}, state.RoleDeployer, "ns-team", state.SubjectGroup, "ops")
	user("vera", nil, state.RoleViewer, "ns-team", state.PrincipalUser, "vera")
	user("olga", nil, state.RoleAdmin, "ns-other", state.PrincipalUser, "olga")
	bind("b-ci", state.RoleDeployer, "ns-team", state.PrincipalServicePrincipal, "sp-ci")
	tk, err := authn.Mint()
	require.NoError(t, err)
	must(state.CmdCreateToken, state.CreateToken{ID: tk.ID, PrincipalKind: state.PrincipalServicePrincipal, PrincipalID: "sp-ci",
		Hash: tk.Hash, ExpiresAt: time.Now().Add(time.Hour)})
	callers = append(callers, deployCaller{name: "ci", bearer: tk.Token, actor: "serviceprincipal:team/ci"})
	bind("b-ext", state.RoleDeployer, "ns-team", state.SubjectGroup, "oidc:ops2")
	jwt, err := is.Sign(oidctest.Claims{Subject: "zed", Audience: "oce-decide", Groups: []string{"ops2"}})
	require.NoError(t, err)
	callers = append(callers, deployCaller{name: "zed", bearer: jwt, actor: "user:oidc:zed", groups: []string{"oidc:ops2"}})

	srv := httptest.NewServer(api.New(api.Config{Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor,
		Authenticator: authn.New(authn.Config{Bootstrap: "decide-bootstrap-token", Machine: b.M, OIDC: oidc, Clock: time.Now})}, b))
	t.Cleanup(srv.Close)
	auth := admission.AuthSupport{}
	for topo, methods := range b.Driver().Capabilities().Topologies {
		auth[topo] = slices.Clone(methods)
	}
	ra := &policy.Reauthorizer{Driver: iam.NewCedar(b.M), State: b.M, Auth: auth}

	// viaAPI deploys through the API.
	viaAPI := func(t *testing.T, c deployCaller, agent string) decision {
		before, audits := b.M.DigestWithoutAudit(), len(b.M.Audit(0, 0))
		status, body := send(t, srv.URL, "POST", "/v1/namespaces/team/agents/"+agent+"/deploy", nil, c.bearer)
		if status == http.StatusAccepted {
			return decision{Allowed: true}
		}
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, status, "%s deploys %s: %s", c.name, agent, body)
		require.Equal(t, before, b.M.DigestWithoutAudit(), "a refused deploy changes nothing but the audit")
		recs := b.M.Audit(0, 0)
		require.Len(t, recs, audits+1, "a refused deploy appends one audit record")
		require.Equal(t, c.actor, recs[len(recs)-1].Actor, "with its actor")
		require.Equal(t, state.OutcomeDenied, recs[len(recs)-1].Outcome)
		var env struct {
			Error struct {
				Code    string            `json:"code"`
				Details map[string]string `json:"details"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &env), "%s", body)
		return decision{Code: env.Error.Code, Action: env.Error.Details["action"], Resource: env.Error.Details["resource"],
			Policies: env.Error.Details["policies"], Reason: env.Error.Details["reason"]}
	}
	// viaWorker admits the same deploy as the caller without asking (as a
	// Restriction or binding added after the API's decision would find it)
	// and reauthorizes its work as the engine does at claim.
	n := 0
	viaWorker := func(t *testing.T, c deployCaller, agent string) (decision, string) {
		n++
		a, ok := b.M.Agent("a-" + agent)
		require.True(t, ok)
		cfg, _ := b.M.Configuration(a.ConfigurationID)
		out, err := admission.Admit(admission.Input{Agent: a, Configuration: cfg, Installation: b.M.Installation(), Auth: auth})
		require.NoError(t, err)
		workID := fmt.Sprintf("w-%d", n)
		_, err = state.Propose(apitest.WithActor(ctx, c.actor), b, state.CmdAdmitRevision, state.AdmitRevision{
			WorkID: workID, ActorGroups: c.groups, Revision: state.Revision{ID: fmt.Sprintf("r-%d", n), AgentID: a.ID,
				NamespaceID: a.NamespaceID, Document: out.Document, ConfigurationID: cfg.ID, ConfigurationGeneration: cfg.Generation,
				Harness: out.Harness, Mode: out.Mode, ComputeID: b.Driver().Capabilities().Name, HarnessAuth: a.HarnessAuth,
				Plugins: a.Plugins, ServicePrincipalID: a.ServicePrincipalID}})
		require.NoError(t, err)
		w, ok := b.M.Work(workID)
		require.True(t, ok)
		require.Equal(t, c.actor, w.Actor)
		err = ra.Reauthorize(ctx, w)
		if err == nil {
			return decision{Allowed: true}, ""
		}
		var re *policy.ReauthError
		require.True(t, errors.As(err, &re), "%v", err)
		return decision{Code: string(re.Code)}, re.Detail
	}

	seen := map[string]bool{}
	for _, c := range callers {
		for _, a := range agents {
			t.Run(c.name+"/"+a.name, func(t *testing.T) {
				fromAPI := viaAPI(t, c, a.name)
				fromWorker, detail := viaWorker(t, c, a.name)
				require.Equal(t, fromAPI.Allowed, fromWorker.Allowed, "API %+v, worker %+v %s", fromAPI, fromWorker, detail)
				if fromAPI.Allowed {
					seen["allowed"] = true
					return
				}
				if fromAPI.Reason != "" {
					require.Equal(t, fromAPI.Reason, fromWorker.Code, "the worker refuses the reference as the API did: %s", detail)
					require.Contains(t, detail, fromAPI.Resource, "naming the same source")
					seen[fromAPI.Reason] = true
					return
				}
				require.Equal(t, string(codes.Forbidden), fromAPI.Code)
				require.Equal(t, string(codes.ReauthorizationDenied), fromWorker.Code, detail)
				require.Contains(t, detail, " may no longer "+fromAPI.Action+" "+fromAPI.Resource+" (",
					"the worker refuses the action and resource the API refused")
				kind := fromAPI.Action + " " + strings.SplitN(fromAPI.Resource, "::", 2)[0]
				if fromAPI.Policies != "" {
					require.Contains(t, detail, "("+fromAPI.Policies+")", "the same policies decided")
				}
				if strings.Contains(fromAPI.Policies, "restriction:") {
					kind += " by a Restriction"
				}
				seen[kind] = true
			})
		}
	}
	// The table exercises every decision of a deploy: each refuses some
	// deploy, and some deploys pass them all.
	require.Equal(t, map[string]bool{"allowed": true, "DeployAgent Agent": true,
		"UseServicePrincipal ServicePrincipal by a Restriction": true,
		"UseCredentialSource CredentialSource by a Restriction": true, "DeployAgent Agent by a Restriction": true,
		string(codes.CrossNamespaceReference): true, string(codes.CredentialSourceNotFound): true}, seen)
}
