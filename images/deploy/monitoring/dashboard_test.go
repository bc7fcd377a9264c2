package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// What "the dashboard loads" means here, short of running Grafana: the file
// is a JSON object Grafana's import accepts and renders the way it is meant
// to, namely
//   - a title, a uid Grafana's URL rules allow, a schemaVersion Grafana
//     migrates from (36: panels name their data source by {type, uid}),
//     the time range and refresh Grafana's pickers parse;
//   - every panel a core panel type with a unique id, a title and a gridPos
//     inside the 24-column grid, no two overlapping;
//   - every panel and target on the data source variable, which is a
//     Prometheus one;
//   - every variable an expression or another variable names is defined
//     (or one of Grafana's $__ globals);
//   - every target's expression, with the variables replaced the way
//     Grafana does, parses as PromQL: promtool checks them as the
//     recording rules of a rules file (promtool has no expression-only
//     check), and the variable queries' label_values metric too;
//   - every metric, label and value they name is one a real coordinator
//     exposes (checkExpr, in TestMonitoringBundle).

// dashboard is grafana-dashboard.json as far as these checks read it.
type dashboard struct {
	Title      string            `json:"title"`
	UID        string            `json:"uid"`
	Schema     int               `json:"schemaVersion"`
	Refresh    string            `json:"refresh"`
	Time       map[string]string `json:"time"`
	Panels     []json.RawMessage `json:"panels"`
	Templating struct {
		List []dashboardVar `json:"list"`
	} `json:"templating"`
}

type dashboardVar struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Query      any         `json:"query"`
	Definition string      `json:"definition"`
	Datasource *datasource `json:"datasource"`
	IncludeAll bool        `json:"includeAll"`
	AllValue   string      `json:"allValue"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         *int              `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource *datasource       `json:"datasource"`
	GridPos    *gridPos          `json:"gridPos"`
	Panels     []json.RawMessage `json:"panels"`
	Targets    []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

type gridPos struct {
	H, W, X, Y int
}

func (g gridPos) overlaps(o gridPos) bool {
	return g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H
}

// corePanels are the panel types Grafana ships (no plugin to install).
var corePanels = map[string]bool{"row": true, "timeseries": true, "stat": true, "gauge": true, "bargauge": true,
	"table": true, "text": true, "heatmap": true, "histogram": true, "piechart": true, "barchart": true,
	"state-timeline": true, "status-history": true, "logs": true, "alertlist": true, "dashlist": true, "news": true,
	"nodeGraph": true, "traces": true, "flamegraph": true, "geomap": true, "canvas": true, "xychart": true, "trend": true}

var (
	// Grafana's variable syntaxes: $name, ${name}, ${name:format}, [[name]].
	varRef     = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]`)
	dashUID    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
	timeRef    = regexp.MustCompile(`^now(-[0-9]+[smhdwMy])?$`)
	labelVals  = regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)$`)
	recordName = regexp.MustCompile(`[^A-Za-z0-9_:]`)
)

// grafanaGlobals are Grafana's built-in variables a Prometheus query uses,
// with a value Grafana could give them.
var grafanaGlobals = map[string]string{"__rate_interval": "2m", "__interval": "30s", "__interval_ms": "30000",
	"__range": "6h", "__range_s": "21600", "__range_ms": "21600000"}

// interpolate replaces variables as Grafana does before it sends a query:
// a variable with "All" selected becomes its allValue, the globals a
// duration.
func interpolate(t testingT, expr string, vars map[string]dashboardVar) string {
	t.Helper()
	return varRef.ReplaceAllStringFunc(expr, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := grafanaGlobals[name]; ok {
			return v
		}
		v, ok := vars[name]
		require.True(t, ok, "%q names no variable of the dashboard", m)
		require.True(t, v.IncludeAll && v.AllValue != "", "variable %s: no allValue to interpolate", name)
		return v.AllValue
	})
}

// checkDashboardLoads applies the checks above but the metrics' (promtool
// runs in dir).
func checkDashboardLoads(ctx context.Context, t testingT, bin, dir string, raw []byte) {
	t.Helper()
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d), "valid JSON")
	require.NotEmpty(t, d.Title)
	require.Regexp(t, dashUID, d.UID)
	require.GreaterOrEqual(t, d.Schema, 36, "schemaVersion: panels name their data source by uid")
	require.Regexp(t, timeRef, d.Time["from"])
	require.Regexp(t, timeRef, d.Time["to"])
	require.Regexp(t, promDuration, d.Refresh)

	vars := map[string]dashboardVar{}
	dsVar := ""
	for _, v := range d.Templating.List {
		require.NotContains(t, vars, v.Name, "variable %s twice", v.Name)
		vars[v.Name] = v
		switch v.Type {
		case "datasource":
			require.Equal(t, "prometheus", v.Query, "variable %s", v.Name)
			dsVar = v.Name
		case "query":
			require.NotNil(t, v.Datasource, v.Name)
		}
	}
	require.NotEmpty(t, dsVar, "a Prometheus data source variable")
	onPrometheus := func(where string, ds *datasource) {
		require.NotNil(t, ds, "%s names its data source", where)
		require.Equal(t, datasource{Type: "prometheus", UID: "${" + dsVar + "}"}, *ds, where)
	}

	// The expressions Prometheus will be sent, as recording rules.
	var recs []map[string]string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		onPrometheus("variable "+v.Name, v.Datasource)
		m := labelVals.FindStringSubmatch(v.Definition)
		require.NotNil(t, m, "variable %s: a label_values query", v.Name)
		recs = append(recs, map[string]string{"record": "dashboard:var_" + v.Name, "expr": interpolate(t, m[1], vars)})
	}
	var placed []gridPos
	var walk func(raw []json.RawMessage, nested bool)
	walk = func(raw []json.RawMessage, nested bool) {
		for _, r := range raw {
			var p panel
			require.NoError(t, json.Unmarshal(r, &p))
			require.NotNil(t, p.ID)
			require.True(t, corePanels[p.Type], "panel %q: type %q is no core panel", p.Title, p.Type)
			g := *p.GridPos
			require.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v", p.Title, g)
			if !nested {
				for _, o := range placed {
					require.False(t, g.overlaps(o), "panel %q at %+v overlaps %+v", p.Title, g, o)
				}
				placed = append(placed, g)
			}
			if p.Type != "row" {
				onPrometheus("panel "+p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				onPrometheus(fmt.Sprintf("panel %s target %s", p.Title, tg.RefID), tg.Datasource)
				recs = append(recs, map[string]string{
					"record": recordName.ReplaceAllString(fmt.Sprintf("dashboard:panel_%d_%s", *p.ID, tg.RefID), "_"),
					"expr":   interpolate(t, tg.Expr, vars)})
			}
			// A collapsed row carries its panels.
			walk(p.Panels, true)
		}
	}
	walk(d.Panels, false)
	require.NotEmpty(t, recs)

	rules, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard.rules.yaml"), rules, 0o600))
	out, err := execPromtool(ctx, bin, dir, "check", "rules", "dashboard.rules.yaml")
	require.NoError(t, err, "every dashboard expression parses as PromQL:\n%s", out)
	require.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(recs)), out)
}

// The dashboard checks refuse what Grafana would not load or Prometheus
// would not run (the real dashboard, one mistake each).
func TestDashboardChecksRefuse(t *testing.T) {
	good, err := os.ReadFile("grafana-dashboard.json")
	require.NoError(t, err)
	bin := promtool(t)
	checkDashboardLoads(t.Context(), t, bin, t.TempDir(), good)
	for _, tc := range []struct{ name, old, new string }{
		{"not JSON", `"panels": [`, `"panels": [,`},
		{"PromQL that does not parse", `max by (state) (oce_agents{job=~\"$job\"})`, `max by (state) (oce_agents{job=~\"$job\"}`},
		{"an undefined variable", `max by (state) (oce_agents{job=~\"$job\"})`, `max by (state) (oce_agents{job=~\"$jobs\"})`},
		{"another data source", `"uid": "${datasource}"`, `"uid": "prometheus-main"`},
		{"an old schema", `"schemaVersion": 39`, `"schemaVersion": 27`},
		{"a plugin panel", `"type": "stat"`, `"type": "grafana-polystat-panel"`},
		{"panels overlapping", `"x": 8,`, `"x": 4,`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.old, tc.new, 1)
			require.NotEqual(t, string(good), bad, "the mutation applies")
			ft := &fakeT{}
			func() {
				defer func() {
					if r := recover(); r != nil && r != ft {
						panic(r)
					}
				}()
				checkDashboardLoads(t.Context(), ft, bin, t.TempDir(), []byte(bad))
			}()
			require.True(t, ft.failed, "%s passed the checks", tc.name)
		})
	}
}
