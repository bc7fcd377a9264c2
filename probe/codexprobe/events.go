package codexprobe

import (
	"encoding/json"
	"strings"
)

// event is one `codex exec --json` line, reduced to what classification
// needs. Messages stay in memory only; they are never logged.
type event struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	invalid bool // the line was not a JSON object with a type
}

// maxLines caps the events kept from one attempt (a runaway child cannot
// grow the supervisor's memory without bound).
const maxLines = 4096

// maxLine caps one stdout line.
const maxLine = 1 << 20

func parseEvent(line []byte) event {
	var e event
	if json.Unmarshal(line, &e) != nil || e.Type == "" {
		return event{invalid: true}
	}
	return e
}

// Exec event and item types (docs/design/codex.md#s5).
const (
	evThreadStarted = "thread.started"
	evTurnStarted   = "turn.started"
	evTurnCompleted = "turn.completed"
	evTurnFailed    = "turn.failed"
	evItemStarted   = "item.started"
	evItemUpdated   = "item.updated"
	evItemCompleted = "item.completed"
	evError         = "error"

	itemAgentMessage = "agent_message"
	itemReasoning    = "reasoning"
	itemError        = "error" // non-fatal warning item (e.g. unknown model metadata)
)

// toolItems are item types that mean a tool ran or was attempted.
var toolItems = map[string]bool{
	"command_execution": true, "file_change": true, "mcp_tool_call": true, "web_search": true,
	"collab_tool_call": true, "image_generation": true, "image_view": true, "view_image": true,
	"todo_list": true, "dynamic_tool_call": true, "custom_tool_call": true,
}

// recoveredError reports an `error` event that Codex recovers from itself
// (docs/design/reference.md#s2-2: tolerated up to maxRecovered times).
func recoveredError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.HasPrefix(m, "reconnecting...") || strings.Contains(m, "stream disconnected")
}

// maxRecovered is how many recovered error events a successful turn may carry.
const maxRecovered = 10
