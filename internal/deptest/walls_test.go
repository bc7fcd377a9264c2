package deptest

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Runtime agents run in the Agents' containers; they talk to the
// coordinator and to each other over the wire only.
var agents = Pkgs("gatewayd/...", "harnessd/...", "nodehost/...", "probe/...",
	"cmd/gatewayd", "cmd/harnessd", "cmd/nodehost", "cmd/fakeprovider")

// components are everything that is not a shared building block.
var components = Pkgs("coordinator/...", "gatewayd/...", "harnessd/...", "nodehost/...", "probe/...",
	"occ/...", "cmd/...", "e2e/...", "internal/...")

// heavy are the modules only a coordinator links: Raft, its Bolt stores,
// and the Kubernetes client.
var heavy = []string{"github.com/hashicorp/raft/...", "github.com/hashicorp/raft-boltdb/...",
	"go.etcd.io/bbolt/...", "github.com/boltdb/bolt/...", "k8s.io/client-go/...", "k8s.io/api/..."}

// production are the binaries oce ships: the coordinator, the supervisors
// of the Agents' images, occ, and the offline model provider `occ dev up`
// runs for the demo.
var production = Pkgs("cmd/coordinator", "cmd/gatewayd", "cmd/harnessd", "cmd/nodehost", "cmd/occ", "cmd/fakeprovider")

// testSupport are the packages that exist for tests: the in-memory compute
// driver (and what registers it), fakes, harnesses, test helpers.
var testSupport = append(Pkgs("coordinator/compute/memory", "coordinator/server/memorydriver", "coordinator/api/apitest",
	"coordinator/authn/oidctest", "coordinator/clustertest", "coordinator/compute/kubernetes/fakeapi",
	"coordinator/compute/kubernetes/k8stest/...", "gatewayd/internal/fakeopenclaw", "shared/logtest", "shared/octest",
	"shared/secretfile/secretfiletest", "shared/supervise/internal/cmd/supervisetest", "images/...", "e2e/...",
	"internal/..."), "github.com/stretchr/testify/...")

// testingImporters are the packages outside the module that production
// binaries link and that import the standard library's testing package from
// non-test code, each with why it is tolerated. No package of oce may.
var testingImporters = map[string]string{
	"github.com/hashicorp/raft": "its testing.go (MakeCluster and friends) is a non-test file of the raft package " +
		"itself, so every program that links Raft lists testing; the coordinator calls none of it",
}

// stateCodec is what coordinator/state may import besides the standard
// library: its codec. Today that is encoding/json (standard); a binary
// codec module would be named here, and nothing else.
var stateCodec []string

// walls are the house's import rules (docs/design/architecture.md#import-rules),
// each with an edge that crosses it.
var walls = []Rule{
	{
		Name: "runtime agents ↛ coordinator, occ",
		Why:  "supervisors and probes ship in the Agents' images and talk to the coordinator over HTTP only",
		From: agents, Forbid: Pkgs("coordinator/...", "occ/...", "cmd/coordinator", "cmd/occ"),
		Crossing: [2]string{Module + "/gatewayd", Module + "/coordinator/compute"},
	},
	{
		Name: "supervisors ↛ each other",
		Why:  "gatewayd, harnessd and nodehost run in different containers and meet over the wire",
		From: Pkgs("gatewayd/...", "cmd/gatewayd"), Forbid: Pkgs("harnessd/...", "nodehost/..."),
		Crossing: [2]string{Module + "/gatewayd", Module + "/nodehost"},
	},
	{
		Name: "harnessd ↛ gatewayd, nodehost",
		Why:  "harnessd starts nodehost as a process, never links it",
		From: Pkgs("harnessd/...", "cmd/harnessd"), Forbid: Pkgs("gatewayd/...", "nodehost/..."),
		Crossing: [2]string{Module + "/harnessd", Module + "/nodehost"},
	},
	{
		Name: "nodehost ↛ gatewayd, harnessd",
		Why:  "the node speaks the gateway protocol from shared/ocproto",
		From: Pkgs("nodehost/...", "cmd/nodehost"), Forbid: Pkgs("gatewayd/...", "harnessd/..."),
		Crossing: [2]string{Module + "/nodehost", Module + "/gatewayd"},
	},
	{
		Name: "probe ↛ supervisors",
		Why:  "probe/ imports only shared/: every supervisor uses it",
		From: Pkgs("probe/..."), Forbid: Pkgs("gatewayd/...", "harnessd/...", "nodehost/..."),
		Crossing: [2]string{Module + "/probe/upfront", Module + "/gatewayd"},
	},
	{
		Name: "shared ↛ components",
		Why:  "shared/ holds building blocks several components use; it depends on none of them",
		From: Pkgs("shared/..."), Forbid: components,
		Crossing: [2]string{Module + "/shared/contract", Module + "/coordinator/state"},
	},
	{
		Name:   "occ is a pure API client",
		Why:    "occ links only coordinator/client, the API's wire types and shared/; never Raft, Bolt or client-go",
		From:   Pkgs("occ/...", "cmd/occ"),
		Forbid: append(Pkgs("coordinator/...", "gatewayd/...", "harnessd/...", "nodehost/...", "probe/..."), heavy...),
		// -o jsonpath is kubectl's evaluator: two packages of the client-go
		// module that import only the standard library, none of the client.
		Allow: append(Pkgs("coordinator/client", "coordinator/api/wire"),
			"k8s.io/client-go/util/jsonpath", "k8s.io/client-go/third_party/forked/golang/template"),
		Crossing: [2]string{Module + "/occ", Module + "/coordinator/compute/local"},
	},
	{
		Name: "coordinator/client speaks wire only",
		Why:  "the client is what occ links: no state machine, store or driver behind it",
		From: Pkgs("coordinator/client"), Forbid: append(Pkgs("coordinator/..."), heavy...),
		Allow:    Pkgs("coordinator/api/wire"),
		Crossing: [2]string{Module + "/coordinator/client", Module + "/coordinator/state"},
	},
	{
		Name: "coordinator/api/wire stands alone",
		Why:  "the HTTP contract evolves apart from the Raft log encoding",
		From: Pkgs("coordinator/api/wire"), StdOnly: true, Allow: Pkgs("shared/codes", "shared/contract"),
		Crossing: [2]string{Module + "/coordinator/api/wire", Module + "/coordinator/state"},
	},
	{
		Name: "coordinator ↛ supervisors, occ",
		Why:  "the local driver starts supervisors as processes, it does not link them",
		From: Pkgs("coordinator/...", "cmd/coordinator"), Forbid: Pkgs("gatewayd/...", "harnessd/...", "nodehost/...", "occ/..."),
		Crossing: [2]string{Module + "/coordinator/compute/local", Module + "/gatewayd"},
	},
	{
		Name: "production binaries link no test code",
		Why: "what ships runs no fake: the in-memory driver, fakes and test helpers are built into tests and " +
			"the test coordinator (cmd/coordinator -tags memorydriver) only",
		From: production, Forbid: testSupport,
		Crossing: [2]string{Module + "/cmd/coordinator", Module + "/coordinator/compute/memory"},
	},
	{
		Name: "coordinator/policy speaks no HTTP and writes nothing",
		Why: "the deploy decision is made alike for an API request and for the engine's reauthorization: over a " +
			"read-only view of the state, each caller turning a refusal into its own answer",
		From:     Pkgs("coordinator/policy"),
		Forbid:   append([]string{"net/http", "net/http/..."}, Pkgs("coordinator/api/...", "coordinator/store/...", "coordinator/engine/...")...),
		Crossing: [2]string{Module + "/coordinator/policy", "net/http"},
	},
	{
		Name: "iam ↛ admission, policy",
		Why:  "iam answers authorization questions; the deploy decision, which runs admission, is coordinator/policy's",
		From: Pkgs("coordinator/iam/..."), Forbid: Pkgs("coordinator/admission/...", "coordinator/policy/..."),
		Crossing: [2]string{Module + "/coordinator/iam", Module + "/coordinator/admission"},
	},
	{
		Name: "coordinator/state: the standard library and its codec only",
		Why:  "Apply must be deterministic and the log encoding must not move with a dependency",
		From: Pkgs("coordinator/state"), StdOnly: true, Allow: stateCodec,
		Crossing: [2]string{Module + "/coordinator/state", "github.com/hashicorp/raft"},
	},
}

func TestWalls(t *testing.T) {
	g, err := Load()
	require.NoError(t, err)
	require.Contains(t, g, Module+"/coordinator/state", "the module's packages are listed")
	for _, r := range walls {
		t.Run(r.Name, func(t *testing.T) {
			subjects := r.Subjects(g)
			require.NotEmpty(t, subjects, "a rule that applies to no package guards nothing")
			for _, p := range subjects {
				if v := r.Violations(g, p); len(v) > 0 {
					t.Errorf("%s depends on %s: %s", p, strings.Join(v, ", "), r.Why)
				}
			}
		})
	}
}

// TestProductionLinksNoTesting: no production binary links the standard
// library's testing package through a package of oce or an unlisted
// dependency; every tolerated importer is still linked (a stale allowance
// fails), and an oce package importing testing is reported.
func TestProductionLinksNoTesting(t *testing.T) {
	g, err := Load()
	require.NoError(t, err)
	imports, err := LoadImports(production...)
	require.NoError(t, err)
	tolerated := map[string]bool{}
	for _, bin := range production {
		require.Contains(t, g, bin, "a production binary is a package of the module")
		for _, p := range Importers(g, imports, bin, "testing") {
			if _, ok := testingImporters[p]; !ok {
				t.Errorf("%s links testing: %s imports it", bin, p)
			}
			tolerated[p] = true
		}
	}
	for p := range testingImporters {
		require.True(t, tolerated[p], "%s no longer brings testing into a production binary: drop its allowance", p)
	}
	crossed := Graph{}
	for k, v := range imports {
		crossed[k] = v
	}
	server := Module + "/coordinator/server"
	crossed[server] = append(slices.Clone(imports[server]), "testing")
	require.Equal(t, []string{"github.com/hashicorp/raft", server}, Importers(g, crossed, Module+"/cmd/coordinator", "testing"))
}

// TestWallsCanFail proves every rule fails on the edge it forbids: the
// crossing, added to the real graph, is reported — and nothing else is.
func TestWallsCanFail(t *testing.T) {
	g, err := Load()
	require.NoError(t, err)
	for _, r := range walls {
		t.Run(r.Name, func(t *testing.T) {
			from, dep := r.Crossing[0], r.Crossing[1]
			require.True(t, MatchAny(r.From, from), "the crossing starts inside the wall")
			require.Contains(t, g, from, "the crossing starts at a real package")
			crossed := Graph{}
			for k, v := range g {
				crossed[k] = v
			}
			crossed[from] = append(slices.Clone(g[from]), dep)
			require.Equal(t, []string{dep}, r.Violations(crossed, from))
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"oce.dev/oce/coordinator/...", "oce.dev/oce/coordinator", true},
		{"oce.dev/oce/coordinator/...", "oce.dev/oce/coordinator/state", true},
		{"oce.dev/oce/coordinator/...", "oce.dev/oce/coordinatorx", false},
		{"oce.dev/oce/occ", "oce.dev/oce/occ", true},
		{"oce.dev/oce/occ", "oce.dev/oce/occ/sub", false},
	} {
		require.Equal(t, tc.want, Match(tc.pattern, tc.path), "%s %s", tc.pattern, tc.path)
	}
	require.True(t, Standard("crypto/internal/entropy/v1.0.0"))
	require.False(t, Standard("oce.dev/oce/shared/codes"))
	require.False(t, Standard("github.com/hashicorp/raft"))
}
