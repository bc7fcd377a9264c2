package fakeprovider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrBadRequest reports a model request body the fake cannot decode.
var ErrBadRequest = errors.New("fakeprovider: bad request body")

// maxBody caps request bodies (Codex sends about 40 KB).
const maxBody = 8 << 20

// Request is what the fake needs from a model request, whichever API sent it.
type Request struct {
	// Empty is true for the upfront check's `{}` body (no fields at all).
	Empty bool
	Model string
	// Stream is the request's "stream" flag.
	Stream bool
	// Prompt is the text of the last user message.
	Prompt string
	// ToolResult is true when the conversation already carries a tool result
	// (function_call_output, role "tool", or an Anthropic tool_result block).
	ToolResult bool
	// ToolName is the tool a TRIGGER_TOOL call uses: exec_command when
	// declared, else the first declared tool ("" when none).
	ToolName string
	// Tools are the names of the declared tools, in order.
	Tools []string
	// Prewarm is true for "generate": false (Codex warms a Responses
	// WebSocket with such a frame before the real request).
	Prewarm bool
	// Echo are the EchoPrefix markers the request carries outside its last
	// user message — in the instructions or system prompt the runtime built
	// (e.g. from the Agent's AGENTS.md) — in order, each once.
	Echo []string
}

// EchoPrefix starts a marker the fake repeats in its reply when it finds it
// in a request's instructions, so tests can see what a runtime put into the
// prompt (an edited AGENTS.md reaching the next turn).
const EchoPrefix = "OCE-ECHO-"

var echoRE = regexp.MustCompile(EchoPrefix + `[A-Za-z0-9_-]{1,64}`)

// echoes finds the markers of body that the prompt does not carry itself.
func echoes(body []byte, prompt string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range echoRE.FindAll(body, -1) {
		s := string(m)
		if seen[s] || strings.Contains(prompt, s) {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// Digest is the short deterministic digest of a prompt that every reply
// echoes, so tests can tell which request produced a reply.
func Digest(prompt string) string {
	s := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(s[:4])
}

// DecodeRequest decodes a model request body of the given API path
// (/v1/responses, /v1/chat/completions, /v1/messages, or a response.create
// WebSocket frame decoded as /v1/responses).
func DecodeRequest(path string, body []byte) (Request, error) {
	if len(body) > maxBody {
		return Request{}, fmt.Errorf("%w: body over %d bytes", ErrBadRequest, maxBody)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return Request{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if raw == nil {
		return Request{}, fmt.Errorf("%w: not an object", ErrBadRequest)
	}
	if len(raw) == 0 {
		return Request{Empty: true}, nil
	}
	var r Request
	if m, ok := raw["model"]; ok {
		if err := json.Unmarshal(m, &r.Model); err != nil {
			return Request{}, fmt.Errorf("%w: model: %v", ErrBadRequest, err)
		}
	}
	if s, ok := raw["stream"]; ok && !bytes.Equal(bytes.TrimSpace(s), []byte("null")) {
		if err := json.Unmarshal(s, &r.Stream); err != nil {
			return Request{}, fmt.Errorf("%w: stream: %v", ErrBadRequest, err)
		}
	}
	if g, ok := raw["generate"]; ok {
		var gen *bool
		if err := json.Unmarshal(g, &gen); err != nil {
			return Request{}, fmt.Errorf("%w: generate: %v", ErrBadRequest, err)
		}
		r.Prewarm = gen != nil && !*gen
	}
	if t, ok := raw["tools"]; ok {
		var tools []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		// Tools are informational; an odd shape is not an error. Codex's
		// exec_command wins so TRIGGER_TOOL runs a shell command there.
		if json.Unmarshal(t, &tools) == nil {
			for _, tl := range tools {
				n := tl.Name
				if n == "" {
					n = tl.Function.Name
				}
				if n == "" {
					n = "(" + tl.Type + ")"
				}
				r.Tools = append(r.Tools, n)
				if r.ToolName == "" || n == "exec_command" {
					r.ToolName = n
				}
			}
		}
	}
	var err error
	switch path {
	case pathResponses:
		err = decodeResponsesInput(raw["input"], &r)
	case pathChat, pathMessages:
		err = decodeMessages(raw["messages"], &r)
	default:
		err = fmt.Errorf("%w: unknown path", ErrBadRequest)
	}
	if err != nil {
		return Request{}, err
	}
	r.Echo = echoes(body, r.Prompt)
	return r, nil
}

// responses input: a string, or items {type, role, content, output}.
func decodeResponsesInput(in json.RawMessage, r *Request) error {
	if len(in) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(in, &s) == nil {
		r.Prompt = s
		return nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(in, &items); err != nil {
		return fmt.Errorf("%w: input: %v", ErrBadRequest, err)
	}
	for _, it := range items {
		switch {
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			r.ToolResult = true
		case it.Role == "user" && (it.Type == "" || it.Type == "message"):
			t, err := contentText(it.Content)
			if err != nil {
				return err
			}
			r.Prompt = t
		}
	}
	return nil
}

// chat/completions and Anthropic messages: [{role, content}].
func decodeMessages(in json.RawMessage, r *Request) error {
	if len(in) == 0 {
		return nil
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(in, &msgs); err != nil {
		return fmt.Errorf("%w: messages: %v", ErrBadRequest, err)
	}
	for _, m := range msgs {
		switch m.Role {
		case "tool":
			r.ToolResult = true
		case "user":
			if hasToolResultBlock(m.Content) {
				r.ToolResult = true
				continue
			}
			t, err := contentText(m.Content)
			if err != nil {
				return err
			}
			r.Prompt = t
		}
	}
	return nil
}

// contentText joins the text parts of a content value: a string, or parts
// {type: input_text|text|output_text, text}.
func contentText(c json.RawMessage) (string, error) {
	if len(c) == 0 || bytes.Equal(bytes.TrimSpace(c), []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", fmt.Errorf("%w: content: %v", ErrBadRequest, err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func hasToolResultBlock(c json.RawMessage) bool {
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(c, &parts) != nil {
		return false
	}
	for _, p := range parts {
		if p.Type == "tool_result" {
			return true
		}
	}
	return false
}

// rawJSON embeds a JSON text verbatim in an encoded value.
type rawJSON string

// MarshalJSON implements json.Marshaler.
func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
