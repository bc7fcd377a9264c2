package harnessd

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/appserver"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/status"
)

// fakeCatalog plays the app-server's plugin methods.
type fakeCatalog struct {
	plugins   map[string]*pluginSummary // by name
	noDetail  map[string]bool
	failOn    map[string]bool // install fails
	staysOff  map[string]bool // installs but never becomes enabled
	calls     []string
	listFails bool
}

func (f *fakeCatalog) Call(ctx context.Context, method string, params, result any) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("request without deadline")
	}
	f.calls = append(f.calls, method)
	p, _ := params.(map[string]any)
	name, _ := p["pluginName"].(string)
	var out any
	switch method {
	case appserver.MethodPluginList:
		if f.listFails {
			return &appserver.RPCError{Code: -32600, Message: "boom"}
		}
		mp := marketplace{Name: "curated"}
		for _, s := range f.plugins {
			mp.Plugins = append(mp.Plugins, *s)
		}
		out = pluginList{Marketplaces: []marketplace{mp}}
	case appserver.MethodPluginRead:
		if f.noDetail[name] {
			out = map[string]any{"plugin": nil}
		} else {
			out = map[string]any{"plugin": map[string]any{"summary": f.plugins[name]}}
		}
	case appserver.MethodPluginInstall:
		if f.failOn[name] {
			return &appserver.RPCError{Code: -32600, Message: "install failed"}
		}
		f.plugins[name].Installed = true
		f.plugins[name].Enabled = !f.staysOff[name]
		out = map[string]any{"appsNeedingAuth": []any{}, "authPolicy": "ON_USE"}
	}
	b, _ := json.Marshal(out)
	if result != nil {
		return json.Unmarshal(b, result)
	}
	return nil
}

func TestInstallPlugins(t *testing.T) {
	f := &fakeCatalog{
		plugins: map[string]*pluginSummary{
			"github": {ID: "github@curated", Name: "github"},
			"linear": {ID: "linear@curated", Name: "linear", Installed: true, Enabled: true},
			"nodoc":  {ID: "nodoc@curated", Name: "nodoc"},
			"broken": {ID: "broken@curated", Name: "broken"},
			"dark":   {ID: "dark@curated", Name: "dark"},
		},
		noDetail: map[string]bool{"nodoc": true},
		failOn:   map[string]bool{"broken": true},
		staysOff: map[string]bool{"dark": true},
	}
	r := InstallPlugins(context.Background(), f, []string{"github", "linear@curated", "absent", "nodoc", "broken", "dark"}, time.Second)
	require.Equal(t, []string{"github", "linear@curated"}, r.Successful)
	require.Equal(t, []status.PluginFailure{
		{PluginID: "absent", Code: codes.PluginNotInCatalog},
		{PluginID: "nodoc", Code: codes.PluginDetailMissing},
		{PluginID: "broken", Code: codes.PluginNotReady},
		{PluginID: "dark", Code: codes.PluginNotReady},
	}, r.Failures)
	require.NotContains(t, f.calls, "", "every request is a known plugin method")

	f2 := &fakeCatalog{listFails: true}
	r = InstallPlugins(context.Background(), f2, []string{"a"}, time.Second)
	require.Empty(t, r.Successful)
	require.Equal(t, []status.PluginFailure{{PluginID: "a", Code: codes.PluginNotInCatalog}}, r.Failures)

	r = AuthRequiredResult([]string{"a", "b"})
	require.Equal(t, []string{}, r.Successful)
	require.Equal(t, codes.PluginAuthRequired, r.Failures[1].Code)
}
