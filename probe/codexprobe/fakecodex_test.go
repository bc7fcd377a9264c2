package codexprobe

// A fake `codex` for unit tests: the test binary itself, started through a
// symlink named "codex". It reproduces the `codex exec --json` event
// sequences and exit codes docs/design/codex.md#s5 measured for 0.169.0, chosen per
// attempt from $CODEX_HOME/fake-scenario (one scenario per line; the last
// repeats). Each call records its argv, environment and pid in
// $CODEX_HOME/fake-call-<n>.json.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type fakeCall struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Pid  int      `json:"pid"`
	Cwd  string   `json:"cwd"`
	// Child is the pid of a grandchild a "hang" scenario started.
	Child int `json:"child,omitempty"`
}

// Exact messages Codex 0.169.0 printed (docs/design/codex.md#s5 and measured runs).
const (
	msg401     = "unexpected status 401 Unauthorized: Incorrect API key provided: sk-PLANTED. You can find your API key at https://platform.openai.com/account/api-keys., url: http://127.0.0.1:18555/v1/responses, request id: req_1"
	msg403     = "unexpected status 403 Forbidden: Forbidden., url: http://127.0.0.1:18555/v1/responses, request id: req_1"
	msg500     = "We’re currently experiencing high demand, which may cause temporary errors."
	msgFailed  = "stream disconnected before completion: fake failure"
	msgDrop    = "stream disconnected before completion: Transport error: network error: error decoding response body"
	msgRefused = "Connection failed: error sending request"
	msg429     = "exceeded retry limit, last status: 429 Too Many Requests, request id: req_1"
	msgTLS     = "Connection failed: error sending request: invalid peer certificate: UnknownIssuer"
	msgMissing = "Missing environment variable: `OCE_PROBE_KEY`."
)

func fakeCodexMain() int {
	home := os.Getenv("CODEX_HOME")
	if home == "" {
		fmt.Fprintln(os.Stderr, "fake codex: no CODEX_HOME")
		return 1
	}
	args := os.Args[1:]
	for _, a := range args {
		if a == "login" {
			key, _ := io.ReadAll(os.Stdin)
			key = bytes.TrimSpace(key)
			if len(key) == 0 {
				fmt.Fprintln(os.Stderr, "No API key provided via stdin.")
				return 1
			}
			b, _ := json.Marshal(map[string]string{"auth_mode": "apikey", "OPENAI_API_KEY": string(key)})
			if err := os.WriteFile(filepath.Join(home, "auth.json"), b, 0o600); err != nil {
				return 1
			}
			writeCall(home, "login", fakeCall{Args: args, Env: os.Environ(), Pid: os.Getpid()})
			return 0
		}
	}
	n := bumpAttempt(home)
	lines, _ := os.ReadFile(filepath.Join(home, "fake-scenario"))
	scen := strings.Fields(string(lines))
	s := "success"
	if len(scen) > 0 {
		s = scen[min(n, len(scen))-1]
	}
	cwd, _ := os.Getwd()
	call := fakeCall{Args: args, Env: os.Environ(), Pid: os.Getpid(), Cwd: cwd}
	out := func(v string) { fmt.Fprintln(os.Stdout, v) }
	thread := `{"type":"thread.started","thread_id":"01a2-fake"}`
	fail := func(msg string) int {
		m, _ := json.Marshal(msg)
		out(thread)
		out(`{"type":"turn.started"}`)
		out(`{"type":"error","message":` + string(m) + `}`)
		out(`{"type":"turn.failed","error":{"message":` + string(m) + `}}`)
		writeCall(home, strconv.Itoa(n), call)
		return 1
	}
	success := func(extra ...string) int {
		out(thread)
		out(`{"type":"turn.started"}`)
		for _, e := range extra {
			out(e)
		}
		out(`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"READY"}}`)
		out(`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":5,"reasoning_output_tokens":0}}`)
		writeCall(home, strconv.Itoa(n), call)
		return 0
	}
	switch s {
	case "success":
		return success()
	case "success-warning":
		// Unknown model metadata: a non-fatal error item (docs/design/codex.md#s3).
		return success(`{"type":"item.completed","item":{"id":"item_w","type":"error","message":"Model metadata for ` + "`fake-model`" + ` not found."}}`)
	case "reconnect":
		return success(`{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: error decoding response body)"}`)
	case "auth401":
		return fail(msg401)
	case "auth403":
		return fail(msg403)
	case "http500":
		return fail(msg500)
	case "failed":
		return fail(msgFailed)
	case "drop":
		return fail(msgDrop)
	case "refused":
		return fail(msgRefused)
	case "ratelimit":
		return fail(msg429)
	case "tls":
		return fail(msgTLS)
	case "missingkey":
		return fail(msgMissing)
	case "tool":
		return success(
			`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'id -u'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
			`{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'id -u'","aggregated_output":"0\n","exit_code":0,"status":"completed"}}`)
	case "noreply":
		out(thread)
		out(`{"type":"turn.started"}`)
		out(`{"type":"turn.completed","usage":{}}`)
		writeCall(home, strconv.Itoa(n), call)
		return 0
	case "emptyreply":
		out(thread)
		out(`{"type":"turn.started"}`)
		out(`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"  "}}`)
		out(`{"type":"turn.completed","usage":{}}`)
		writeCall(home, strconv.Itoa(n), call)
		return 0
	case "unexpected":
		return success(`{"type":"brand.new.event"}`)
	case "twoturns":
		out(`{"type":"turn.started"}`)
		return success()
	case "garbage":
		return success(`this is not json`)
	case "errorevent":
		return success(`{"type":"error","message":"something fatal happened"}`)
	case "dropexit":
		// The stream error without a turn.failed, then a failed exit.
		out(thread)
		out(`{"type":"turn.started"}`)
		out(`{"type":"error","message":"` + msgDrop + `"}`)
		writeCall(home, strconv.Itoa(n), call)
		return 1
	case "exit2":
		fmt.Fprintln(os.Stderr, "Error: config error")
		writeCall(home, strconv.Itoa(n), call)
		return 2
	case "hang":
		// A grandchild holding stdout shows the whole group is killed.
		c := exec.Command("/bin/sleep", "1000")
		c.Stdout = os.Stdout
		_ = c.Start()
		if c.Process != nil {
			call.Child = c.Process.Pid
		}
		writeCall(home, strconv.Itoa(n), call)
		out(thread)
		out(`{"type":"turn.started"}`)
		for {
			time.Sleep(time.Hour)
		}
	case "sigkill", "sigsegv":
		writeCall(home, strconv.Itoa(n), call)
		out(thread)
		out(`{"type":"turn.started"}`)
		if s == "sigsegv" {
			// The Go runtime handles SIGSEGV itself; a shell with the same
			// pid dies by it like a native crash.
			_ = syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -SEGV $$"}, os.Environ())
			return 3
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	}
	fmt.Fprintln(os.Stderr, "fake codex: unknown scenario", s)
	return 3
}

func bumpAttempt(home string) int {
	p := filepath.Join(home, "fake-attempts")
	b, _ := os.ReadFile(p)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	n++
	_ = os.WriteFile(p, []byte(strconv.Itoa(n)), 0o600)
	return n
}

func writeCall(home, n string, c fakeCall) {
	b, _ := json.Marshal(c)
	_ = os.WriteFile(filepath.Join(home, "fake-call-"+n+".json"), b, 0o600)
}
