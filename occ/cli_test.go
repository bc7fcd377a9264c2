package occ_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
	"oce.dev/oce/shared/buildinfo"
	"oce.dev/oce/shared/logtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var (
	hexID     = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	shortID   = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
	timestamp = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b`)
)

// golden compares out, with ids and times normalized, to
// testdata/golden/name (go test -update rewrites it).
func golden(t *testing.T, name, out string) {
	t.Helper()
	norm := timestamp.ReplaceAllString(hexID.ReplaceAllString(out, "<id>"), "<time>")
	norm = shortID.ReplaceAllString(norm, "<id12>")
	// Columns padded to an id's width move with it; tabwriter's padding is
	// not what these files pin.
	norm = regexp.MustCompile(` {2,}`).ReplaceAllString(norm, "  ")
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(norm), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./occ -update to create it")
	require.Equal(t, string(want), norm)
}

// deployed seeds team/cfg/bot and activates one revision.
func deployed(t *testing.T) *harness {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go engine(ctx, h.b, "")
	h.ok("-n", "team", "agent", "deploy", "bot", "--wait", "--timeout", "10s")
	return h
}

func TestDescribeGolden(t *testing.T) {
	h := deployed(t)
	golden(t, "describe.txt", h.ok("-n", "team", "agent", "describe", "bot"))
	require.Contains(t, h.ok("-n", "team", "agent", "describe", "bot", "-o", "wide"), "ID:", "-o wide adds the ids")
	out := h.ok("-n", "team", "agent", "describe", "bot", "-o", "json")
	require.Contains(t, out, `"configuration": "cfg"`, "names, not ids")
	require.Contains(t, out, `"phase": "serving"`, "the coordinator's observed state")
}

func TestWideGolden(t *testing.T) {
	h := deployed(t)
	golden(t, "agent-list-wide.txt", h.ok("-n", "team", "agent", "list", "-o", "wide"))
	golden(t, "agent-list.txt", h.ok("-n", "team", "agent", "list"))
	golden(t, "revisions-wide.txt", h.ok("-n", "team", "revisions", "bot", "-o", "wide"))
}

func TestVersionGolden(t *testing.T) {
	h := newHarness(t)
	b := buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8",
		Runtimes: buildinfo.Pinned()}
	var out, errb bytes.Buffer
	code := occ.Main(context.Background(), []string{"version"}, occ.Options{Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return h.env[k] }, ConfigFile: filepath.Join(h.dir, "occ.yaml"), WorkDir: h.dir,
		Build: &b})
	require.Equal(t, 0, code, errb.String())
	// The server half is the test binary's own build: keep the client's row.
	lines := strings.Split(out.String(), "\n")
	require.Len(t, lines, 4, out.String())
	require.True(t, strings.HasPrefix(lines[2], "coordinator"), lines[2])
	golden(t, "version.txt", strings.Join(lines[:2], "\n")+"\n")
	client := h.ok("version", "--client", "-o", "json")
	require.NotContains(t, client, "server")
	require.Contains(t, client, buildinfo.Pinned().OpenClaw)
}

func TestOutputFormats(t *testing.T) {
	h := deployed(t)
	require.Equal(t, "agent/bot\n", h.ok("-n", "team", "agent", "list", "-o", "name"))
	require.Equal(t, "bot\n", h.ok("-n", "team", "agent", "list", "-o", "jsonpath={.items[*].name}"))
	require.Equal(t, "embedded\n", h.ok("-n", "team", "agent", "get", "bot", "-o", "jsonpath={.executionMode}"))
	noHeaders := h.ok("-n", "team", "agent", "list", "--no-headers")
	require.NotContains(t, noHeaders, "NAME")
	require.True(t, strings.HasPrefix(noHeaders, "bot"), noHeaders)
	for _, bad := range []string{"jsonpath", "jsonpath={.items[", "xml", "name=x"} {
		r := h.run("-n", "team", "agent", "list", "-o", bad)
		require.Equal(t, occ.ExitUsage, r.code, bad)
	}
}

func TestEveryCommandHasExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || strings.HasPrefix(c.Name(), "__") {
			return
		}
		if c.Example == "" {
			t.Errorf("%q has no example in its help", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(occ.NewRootCommand(occ.Options{}))
}

func TestTypoSuggestionsAtEveryLevel(t *testing.T) {
	h := newHarness(t)
	for args, want := range map[string]string{
		"agnet":                 "agent",
		"agent delpoy":          "deploy",
		"cluster snapshot svae": "save",
		"namespace lsit":        "list",
	} {
		r := h.run(strings.Fields(args)...)
		require.Equal(t, occ.ExitUsage, r.code, args)
		require.Contains(t, r.stderr, "Did you mean this?", args)
		require.Contains(t, r.stderr, want, args)
	}
}

func TestCompletionOfNames(t *testing.T) {
	h := newHarness(t)
	h.seed()
	h.ok("-n", "team", "agent", "deploy", "bot")
	for args, want := range map[string]string{
		"-n team agent get ":               "bot",
		"-n team agent describe b":         "bot",
		"-n team config get ":              "cfg",
		"namespace get ":                   "team",
		"-n team revisions bot ":           "1\tpending",
		"-n team agent create x --config ": "cfg",
		"--namespace ":                     "team",
		"-o ":                              "jsonpath=TEMPLATE",
	} {
		out := h.ok(append([]string{"__complete"}, strings.Split(args, " ")...)...)
		require.Contains(t, out, want, args)
	}
	out := h.ok("__complete", "-n", "team", "agent", "get", "zz")
	require.NotContains(t, out, "bot", "completions follow the typed prefix")
}

func TestDeleteNamespaceAndConfiguration(t *testing.T) {
	h := newHarness(t)
	h.seed()
	r := h.run("namespace", "delete", "team")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "RESOURCE_CONFLICT")
	require.Contains(t, r.stderr, "agent")
	r = h.run("-n", "team", "config", "delete", "cfg")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "RESOURCE_CONFLICT")
	require.Contains(t, r.stderr, "used by 1 agent")

	h.ok("-n", "team", "config", "create", "spare", "-f", h.file("spare.json", `{}`))
	require.Equal(t, "config/spare deleted\n", h.ok("-n", "team", "config", "delete", "spare"))
	require.NotContains(t, h.ok("-n", "team", "config", "list"), "spare")
	h.ok("namespace", "create", "empty")
	require.Equal(t, "namespace/empty deleted\n", h.ok("namespace", "delete", "empty"))
	require.Equal(t, occ.ExitErr, h.run("namespace", "get", "empty").code)
}

func TestAgentLogsThroughTheDriver(t *testing.T) {
	h := deployed(t)
	// The test engine touches no driver: give the revision a runtime whose
	// driver calls the memory driver reports as its log.
	m := h.b.Machine()
	ns, ok := m.NamespaceByName("team")
	require.True(t, ok)
	ag, ok := m.AgentByName(ns.ID, "bot")
	require.True(t, ok)
	rev, ok := m.Revision(ag.ActiveRevisionID)
	require.True(t, ok)
	require.NoError(t, h.b.Driver().PrepareRevision(context.Background(), rev))
	pretty := h.ok("-n", "team", "agent", "logs", "bot")
	require.Contains(t, pretty, "memory driver call op=PrepareRevision container=gateway\n", "records are rendered")
	require.NotContains(t, pretty, `"op":`)
	require.Contains(t, h.ok("-n", "team", "agent", "logs", "bot", "--harness", "--tail", "5"), "container=harness")
	for _, raw := range [][]string{{"--raw"}, {"-o", "json"}} {
		require.Contains(t, h.ok(append([]string{"-n", "team", "agent", "logs", "bot"}, raw...)...),
			`{"msg":"memory driver call","op":"PrepareRevision","container":"gateway"}`+"\n", "%v keeps the log as written", raw)
	}
	r := h.run("-n", "team", "agent", "logs", "bot", "--gateway", "--harness")
	require.Equal(t, occ.ExitUsage, r.code)
}

// TestWatchAndInterrupt: --watch prints again when the list changes; the
// interrupted command exits 130.
func TestWatchAndInterrupt(t *testing.T) {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- occ.Main(ctx, []string{"-n", "team", "agent", "list", "--watch", "-o", "name"}, occ.Options{
			Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return h.env[k] },
			ConfigFile: filepath.Join(h.dir, "occ.yaml"), WorkDir: h.dir, PollInterval: 5 * time.Millisecond})
	}()
	require.Eventually(t, func() bool { return out.String() == "agent/bot\n" }, 5*time.Second, 5*time.Millisecond)
	h.ok("-n", "team", "agent", "create", "second", "--config", "cfg")
	require.Eventually(t, func() bool { return out.String() == "agent/bot\nagent/bot\nagent/second\n" },
		5*time.Second, 5*time.Millisecond, "the changed list is printed once more (stderr %q)", errb.String())
	cancel()
	select {
	case code := <-done:
		require.Equal(t, occ.ExitInterrupted, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end on interrupt")
	}
}

// TestInterruptedWaitExits130: Ctrl-C during deploy --wait exits 130.
func TestInterruptedWaitExits130(t *testing.T) {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	var errb bytes.Buffer
	code := occ.Main(ctx, []string{"-n", "team", "agent", "deploy", "bot", "--wait"}, occ.Options{
		Stdout: &bytes.Buffer{}, Stderr: &errb, Getenv: func(k string) string { return h.env[k] },
		ConfigFile: filepath.Join(h.dir, "occ.yaml"), WorkDir: h.dir, PollInterval: 5 * time.Millisecond})
	require.Equal(t, occ.ExitInterrupted, code, errb.String())
	require.Contains(t, errb.String(), "interrupted")
}
