package harnessd

import (
	"context"
	"encoding/json"
	"time"

	"oce.dev/oce/shared/appserver"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/status"
)

// Plugin install budgets (docs/design/reference.md#s1-5).
const (
	PluginInstallDeadline = 60 * time.Second
	PluginRequestTimeout  = 10 * time.Second
)

// PluginCaller is the part of the app-server client (*appserver.Client) that
// plugin installation uses.
type PluginCaller interface {
	Call(ctx context.Context, method string, params, result any) error
}

type pluginSummary struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Installed bool   `json:"installed"`
	Enabled   bool   `json:"enabled"`
}

type marketplace struct {
	Name    string          `json:"name"`
	Path    *string         `json:"path"`
	Plugins []pluginSummary `json:"plugins"`
}

type pluginList struct {
	Marketplaces []marketplace `json:"marketplaces"`
}

// PluginResult is the plugin-install outcome published to the Gateway peer.
type PluginResult struct {
	Successful []string
	Failures   []status.PluginFailure
}

// AuthRequiredResult is the api_key outcome: plugins need a ChatGPT
// account, so every selected plugin is disabled and reported.
func AuthRequiredResult(selected []string) PluginResult {
	r := PluginResult{Successful: []string{}, Failures: []status.PluginFailure{}}
	for _, id := range selected {
		r.Failures = append(r.Failures, status.PluginFailure{PluginID: id, Code: codes.PluginAuthRequired})
	}
	return r
}

// InstallPlugins makes each selected plugin installed and enabled through
// the app-server: plugin/list (absent → PLUGIN_NOT_IN_CATALOG), plugin/read
// (no detail → PLUGIN_DETAIL_MISSING), plugin/install when needed, then a
// second plugin/list (not installed and enabled → PLUGIN_NOT_READY). Each
// request is bounded by perRequest and the whole step by ctx.
func InstallPlugins(ctx context.Context, c PluginCaller, selected []string, perRequest time.Duration) PluginResult {
	r := PluginResult{Successful: []string{}, Failures: []status.PluginFailure{}}
	call := func(method string, params, out any) error {
		rctx, cancel := context.WithTimeout(ctx, perRequest)
		defer cancel()
		return c.Call(rctx, method, params, out)
	}
	fail := func(id string, code codes.Code) {
		r.Failures = append(r.Failures, status.PluginFailure{PluginID: id, Code: code})
	}
	var list pluginList
	if err := call(appserver.MethodPluginList, map[string]any{}, &list); err != nil {
		for _, id := range selected {
			fail(id, codes.PluginNotInCatalog)
		}
		return r
	}
	for _, id := range selected {
		mp, p, ok := findPlugin(list, id)
		if !ok {
			fail(id, codes.PluginNotInCatalog)
			continue
		}
		params := map[string]any{"pluginName": p.Name}
		if mp.Path != nil {
			params["marketplacePath"] = *mp.Path
		} else {
			params["remoteMarketplaceName"] = mp.Name
		}
		var detail struct {
			Plugin *json.RawMessage `json:"plugin"`
		}
		if err := call(appserver.MethodPluginRead, params, &detail); err != nil || detail.Plugin == nil {
			fail(id, codes.PluginDetailMissing)
			continue
		}
		if !p.Installed {
			if err := call(appserver.MethodPluginInstall, params, nil); err != nil {
				fail(id, codes.PluginNotReady)
				continue
			}
		}
		var after pluginList
		if err := call(appserver.MethodPluginList, map[string]any{}, &after); err != nil {
			fail(id, codes.PluginNotReady)
			continue
		}
		if _, q, ok := findPlugin(after, id); !ok || !q.Installed || !q.Enabled {
			fail(id, codes.PluginNotReady)
			continue
		}
		r.Successful = append(r.Successful, id)
	}
	return r
}

// findPlugin looks a selected id up by plugin id or name.
func findPlugin(l pluginList, id string) (marketplace, pluginSummary, bool) {
	for _, m := range l.Marketplaces {
		for _, p := range m.Plugins {
			if p.ID == id || p.Name == id {
				return m, p, true
			}
		}
	}
	return marketplace{}, pluginSummary{}, false
}
