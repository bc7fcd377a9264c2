package codexprobe

import (
	"fmt"
	"strings"

	"oce.dev/oce/shared/codes"
)

// Cause details (docs/design/seed-001.md).
const (
	DetailTurnFailed      = "turn-failed"
	DetailErrorEvent      = "error-event"
	DetailToolEvent       = "tool-event"
	DetailUnexpectedEvent = "unexpected-event"
	DetailNoReply         = "no-reply"
)

// verdict is the classification of one attempt.
type verdict struct {
	code  codes.Code
	cause *codes.Cause
	class codes.FailureClass // "" on READY
	retry bool
}

// exit describes how an attempt's process ended.
type exit struct {
	code     int    // exit status; -1 when signalled
	signal   string // SIGKILL, …; "" when it exited
	timedOut bool   // killed by the attempt cap
}

// classify turns one attempt's events and exit into a verdict.
func classify(evs []event, x exit) verdict {
	if x.timedOut {
		return verdict{code: codes.ModelProbeTimeout, class: codes.ClassTimeout, retry: true}
	}
	var (
		turnStarted, turnCompleted, turnFailed int
		reply, tool, unexpected                bool
		recovered                              int
		fatalMsg, failedMsg                    string
		fatal                                  bool
	)
	for i, e := range evs {
		switch e.Type {
		case evThreadStarted:
		case evTurnStarted:
			turnStarted++
		case evTurnCompleted:
			turnCompleted++
			if i != len(evs)-1 {
				unexpected = true
			}
		case evTurnFailed:
			turnFailed++
			if e.Error != nil {
				failedMsg = e.Error.Message
			}
		case evError:
			if recoveredError(e.Message) && recovered < maxRecovered {
				recovered++
				// A recovered error stays a candidate cause if the turn fails.
				fatalMsg = e.Message
				continue
			}
			fatal, fatalMsg = true, e.Message
		case evItemStarted, evItemUpdated, evItemCompleted:
			if e.Item == nil {
				unexpected = true
				continue
			}
			switch {
			case e.Item.Type == itemAgentMessage:
				if e.Type == evItemCompleted && strings.TrimSpace(e.Item.Text) != "" {
					reply = true
				}
			case e.Item.Type == itemReasoning || e.Item.Type == itemError:
			case toolItems[e.Item.Type]:
				tool = true
			default:
				unexpected = true
			}
		default:
			unexpected = true
		}
	}
	failed := func(kind codes.CauseKind, detail string, class codes.FailureClass, retry bool) verdict {
		return verdict{code: codes.ModelProbeFailed, cause: &codes.Cause{Kind: kind, Detail: detail},
			class: class, retry: retry}
	}
	if turnFailed > 0 {
		msg := failedMsg
		if msg == "" {
			msg = fatalMsg
		}
		c := classifyMessage(msg)
		if c.auth {
			return verdict{code: codes.AuthenticationFailed, class: codes.ClassAuth}
		}
		return failed(codes.CauseCodexOutcome, DetailTurnFailed, c.class, c.retry)
	}
	if x.signal != "" {
		// Killed by someone else (OOM killer, operator): transient.
		kill := x.signal == "SIGKILL" || x.signal == "SIGTERM"
		class := codes.ClassKilled
		if !kill {
			class = codes.ClassUnknown
		}
		return failed(codes.CauseProcessExit, "signal-"+x.signal, class, kill)
	}
	if fatal || (x.code != 0 && fatalMsg != "") {
		// A fatal error event, or a failed exit whose last error Codex
		// had announced as recoverable.
		c := classifyMessage(fatalMsg)
		if c.auth {
			return verdict{code: codes.AuthenticationFailed, class: codes.ClassAuth}
		}
		return failed(codes.CauseCodexOutcome, DetailErrorEvent, c.class, c.retry && x.code != 0)
	}
	if tool {
		return failed(codes.CauseCodexOutcome, DetailToolEvent, codes.ClassTool, false)
	}
	if x.code != 0 {
		return failed(codes.CauseProcessExit, fmt.Sprintf("exit-%d", x.code), codes.ClassUnknown, false)
	}
	for _, e := range evs {
		if e.invalid {
			unexpected = true
		}
	}
	if unexpected || turnStarted != 1 || turnCompleted > 1 {
		return failed(codes.CauseCodexOutcome, DetailUnexpectedEvent, codes.ClassProtocol, false)
	}
	if turnCompleted == 0 || !reply {
		return failed(codes.CauseCodexOutcome, DetailNoReply, codes.ClassProtocol, false)
	}
	return verdict{code: codes.Ready}
}

// messageClass is what a Codex error message says, reduced to a closed class.
type messageClass struct {
	auth  bool
	class codes.FailureClass
	retry bool
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// classifyMessage reads a turn.failed / error message (docs/design/codex.md#s5 shapes:
// "unexpected status 401 Unauthorized: …", "We’re currently experiencing
// high demand…" for 500, "stream disconnected before completion: …",
// "Connection failed: error sending request", "exceeded retry limit, last
// status: 429 …", "Missing environment variable: …"). Only a network or
// server failure naming no credential, TLS error or limit retries.
func classifyMessage(msg string) messageClass {
	m := strings.ToLower(msg)
	switch {
	case containsAny(m, "401 unauthorized", "403 forbidden", "status 401", "status 403"):
		return messageClass{auth: true, class: codes.ClassAuth}
	case containsAny(m, "429", "too many requests", "rate limit", "ratelimit", "quota", "usage limit"):
		return messageClass{class: codes.ClassRateLimit}
	case containsAny(m, "certificate", "tls", "ssl", "x509", "handshake", "unknownissuer"):
		return messageClass{class: codes.ClassTLS}
	case containsAny(m, "api key", "api_key", "apikey", "credential", "environment variable", "token",
		"auth", "login", "unauthorized", "forbidden"):
		return messageClass{class: codes.ClassConfig}
	}
	var class codes.FailureClass
	switch {
	case containsAny(m, "high demand", "internal server error", "service unavailable", "bad gateway",
		"gateway timeout", "overloaded", "server error", "server_error", "status 5", "status: 5"):
		class = codes.ClassServer
	case containsAny(m, "stream disconnected", "connection failed", "error sending request",
		"connection reset", "connection refused", "connection closed", "broken pipe", "network",
		"timed out", "timeout", "dns", "reconnecting"):
		class = codes.ClassNetwork
	default:
		return messageClass{class: codes.ClassUnknown}
	}
	return messageClass{class: class, retry: !strings.Contains(m, "limit")}
}
