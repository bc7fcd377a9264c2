package occ_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/occ"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// servingAgent creates and deploys agent "bot" with the engine running.
func (h *harness) servingAgent() (*memory.Driver, string) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	h.b.RunEngine(ctx)
	h.ok("config", "create", "cfg", "-f", h.file("cfg.json", string(admission.ExampleEmbeddedAnthropic)))
	h.ok("credential", "create", "anthropic", "--from-file", "key="+h.file("anthropic.key", "test-anthropic-value"))
	h.ok("agent", "create", "bot", "--config", "cfg", "--auth-method", "api_key", "--auth-kind", "secret",
		"--auth-ref", "secret://default/anthropic#key")
	h.ok("agent", "deploy", "bot", "--wait", "--timeout", "20s")
	a, ok := h.b.M.AgentByName(h.defaultNS(), "bot")
	require.True(h.t, ok)
	return h.b.Driver().(*memory.Driver), a.ID
}

func (h *harness) defaultNS() string {
	ns, ok := h.b.M.NamespaceByName(occ.DefaultNamespace)
	if !ok {
		h.ok("namespace", "create", occ.DefaultNamespace)
		ns, _ = h.b.M.NamespaceByName(occ.DefaultNamespace)
	}
	return ns.ID
}

func TestFilesPutGetLs(t *testing.T) {
	h := newHarness(t)
	h.defaultNS()
	d, id := h.servingAgent()

	// a write must say what it replaces
	r := h.run("agent", "files", "put", "bot", "AGENTS.md", "-f", h.file("a.md", "# one\n"))
	require.Equal(t, occ.ExitUsage, r.code, r.stderr)
	h.ok("agent", "files", "put", "bot", "AGENTS.md", "-f", h.file("a.md", "# one\n"), "--replaces", "absent")
	r = h.run("agent", "files", "get", "bot", "AGENTS.md")
	require.Equal(t, 0, r.code)
	require.Equal(t, "# one\n", r.stdout, "stdout is the document exactly")
	require.Contains(t, r.stderr, sha("# one\n"))

	// stdin, naming the version
	r = h.runIn([]byte("# two\n"), "agent", "files", "put", "bot", "AGENTS.md", "-f", "-", "--replaces", sha("# one\n"))
	require.Equal(t, 0, r.code, r.stderr)
	// a stale version: a conflict naming the current one, nothing written
	r = h.runIn([]byte("# three\n"), "agent", "files", "put", "bot", "AGENTS.md", "-f", "-", "--replaces", sha("# one\n"))
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "changed since the version you started from")
	require.Contains(t, r.stderr, sha("# two\n"))
	doc, _ := d.WorkspaceDocument(id, "AGENTS.md")
	require.Equal(t, "# two\n", doc)

	ls := h.ok("agent", "files", "ls", "bot")
	require.Regexp(t, regexp.MustCompile(`AGENTS.md\s+6\s+\S+\s+`+sha("# two\n")), ls)
	require.Regexp(t, regexp.MustCompile(`SOUL.md\s+-\s+-\s+absent`), ls)

	// bad input is refused locally with the API's reasons
	r = h.run("agent", "files", "put", "bot", "AGENTS.md", "-f", h.file("bin", "\xff\xfe"), "--force")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "DOCUMENT_NOT_UTF8")
	r = h.run("agent", "files", "put", "bot", "AGENTS.md", "-f", h.file("big", strings.Repeat("x", 512<<10+1)), "--force")
	require.Contains(t, r.stderr, "DOCUMENT_TOO_LARGE")
	r = h.run("agent", "files", "put", "bot", "TOOLS.md", "-f", h.file("t", "x"), "--force")
	require.Contains(t, r.stderr, "DOCUMENT_NAME_INVALID")
	doc, _ = d.WorkspaceDocument(id, "AGENTS.md")
	require.Equal(t, "# two\n", doc)
}

func TestFilesEdit(t *testing.T) {
	h := newHarness(t)
	h.defaultNS()
	d, id := h.servingAgent()
	h.ok("agent", "files", "put", "bot", "USER.md", "-f", h.file("u.md", "user\n"), "--force")

	// the editor appends a line; the save names the version it started from
	h.env["EDITOR"] = "sh -c 'echo edited >> \"$0\"'"
	out := h.ok("agent", "files", "edit", "bot", "USER.md")
	require.Contains(t, out, "saved USER.md")
	doc, _ := d.WorkspaceDocument(id, "USER.md")
	require.Equal(t, "user\nedited\n", doc)

	// an editor that changes nothing saves nothing
	h.env["EDITOR"] = "true"
	require.Contains(t, h.ok("agent", "files", "edit", "bot", "USER.md"), "unchanged")

	// someone else saves while the editor is open: a conflict, the edit kept
	marker := filepath.Join(h.dir, "other-saved")
	h.env["EDITOR"] = "sh -c 'echo mine >> \"$0\"; while [ ! -e " + marker + " ]; do sleep 0.01; done'"
	done := make(chan result, 1)
	go func() { done <- h.run("agent", "files", "edit", "bot", "USER.md") }()
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "occ-edit-*", "USER.md"))
		return len(m) > 0
	}, 10*time.Second, 10*time.Millisecond)
	h.ok("agent", "files", "put", "bot", "USER.md", "-f", h.file("o.md", "theirs\n"), "--force")
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	r := <-done
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "changed since the version you started from")
	m := regexp.MustCompile(`kept in (\S+USER.md)`).FindStringSubmatch(r.stderr)
	require.NotNil(t, m, r.stderr)
	kept, err := os.ReadFile(m[1])
	require.NoError(t, err)
	require.Equal(t, "user\nedited\nmine\n", string(kept))
	_ = os.RemoveAll(filepath.Dir(m[1]))
	doc, _ = d.WorkspaceDocument(id, "USER.md")
	require.Equal(t, "theirs\n", doc, "the other save stands")

	// the Gateway is unreachable: the save is uncertain, the user is told to reload
	h.env["EDITOR"] = "sh -c 'echo more >> \"$0\"'"
	d.SetWorkspaceDown(id, true)
	r = h.run("agent", "files", "edit", "bot", "USER.md")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "WORKSPACE_UNAVAILABLE")
}
