package console

import (
	"fmt"
	"html/template"
	"time"

	"oce.dev/oce/coordinator/api/wire"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"login", "error", "namespaces", "agents", "agent", "create", "logs", "files", "credentials"}

var funcs = template.FuncMap{
	"stateClass": func(s string) string {
		switch s {
		case wire.AgentServing:
			return "ok"
		case wire.AgentActivating, wire.AgentDeleting:
			return "busy"
		case wire.AgentDegraded:
			return "warn"
		case wire.AgentFailed:
			return "bad"
		}
		return "idle"
	},
	"revClass": func(s string) string {
		switch s {
		case wire.RevisionActive:
			return "ok"
		case wire.RevisionPending:
			return "busy"
		case wire.RevisionFailed:
			return "bad"
		}
		return "idle"
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ms": func(ms int64) string {
		if ms <= 0 {
			return "—"
		}
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
	},
	"rev": func(n int64) string {
		if n <= 0 {
			return "—"
		}
		return fmt.Sprintf("#%d", n)
	},
	"short": short,
	"dash": func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	},
	"agentPath": agentPath,
	"bytes": func(n int64) string {
		if n < 1024 {
			return fmt.Sprintf("%d B", n)
		}
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	},
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range pageNames {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}
