package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Idempotent writes (docs/API.md). A write that carries an Idempotency-Key
// is recorded with its result in the same Raft entry as its effect (the
// state machine keeps the record, see state/idempotency.go); a repeat of the
// key for the same request answers the recorded status and body, marked
// Idempotent-Replayed, and changes nothing, and a repeat for another request
// is refused. The leader looks the key up before running the handler, and
// the state machine checks it again when the entry applies, so concurrent
// repeats (an answer lost in flight while the original still commits) take
// effect once as well.
const (
	// IdempotencyKeyHeader carries the client's key for one logical write.
	IdempotencyKeyHeader = "Idempotency-Key"
	// ReplayedHeader marks an answer replayed from a recorded key.
	ReplayedHeader = "Idempotent-Replayed"
)

type keyedCtxKey struct{}

// keyedRequest is the key and request hash of a keyed write in flight.
type keyedRequest struct{ key, hash string }

// validKey accepts 1-255 visible ASCII characters.
func validKey(k string) error {
	if len(k) == 0 || len(k) > state.MaxIdempotencyKeyLen {
		return invalid("%s must be 1-%d characters", IdempotencyKeyHeader, state.MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return invalid("%s must be visible ASCII characters", IdempotencyKeyHeader)
		}
	}
	return nil
}

// requestHash identifies a request: method, path with query, and body.
func requestHash(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.RequestURI())
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// keyed wraps the handler of a state write on the leader.
func (s *server) keyed(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		key := r.Header.Get(IdempotencyKeyHeader)
		if key == "" {
			return h(w, r)
		}
		if err := validKey(key); err != nil {
			return err
		}
		body, err := readBody(w, r, s.maxBody)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		kr := keyedRequest{key: key, hash: requestHash(r, body)}
		if done, err := s.replayRecorded(w, r, kr); done {
			return err
		}
		err = h(w, r.WithContext(context.WithValue(r.Context(), keyedCtxKey{}, kr)))
		if err != nil {
			// The original may have applied after the lookup above (its
			// answer lost in flight), making this repeat's own checks
			// fail: its recorded answer is the right one.
			if done, rerr := s.replayRecorded(w, r, kr); done {
				return rerr
			}
		}
		return err
	}
}

// replayRecorded answers from the record of kr's key, if there is a live one.
func (s *server) replayRecorded(w http.ResponseWriter, r *http.Request, kr keyedRequest) (bool, error) {
	rec, ok := s.b.Machine().IdempotencyRecord(s.actor(r), kr.key, time.Now())
	if !ok {
		return false, nil
	}
	if rec.Hash != kr.hash {
		return true, keyReused(kr.key)
	}
	return true, s.replay(w, rec)
}

func keyReused(key string) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: codes.IdempotencyKeyReused,
		Message: fmt.Sprintf("%s %q was used for a different request; nothing was applied", IdempotencyKeyHeader, key)}
}

// actor is the principal a request's proposals are recorded under (the
// idempotency records are scoped to it): the authenticated caller.
func (s *server) actor(r *http.Request) string { return principal(r).Actor() }

// stamped returns ctx carrying the idempotency stamp of a keyed write whose
// answer has status.
func stamped(ctx context.Context, status int) context.Context {
	kr, ok := ctx.Value(keyedCtxKey{}).(keyedRequest)
	if !ok {
		return ctx
	}
	return state.WithIdempotency(ctx, state.Idempotency{Key: kr.key, Hash: kr.hash, Status: status})
}

// commit proposes one state write and answers status with the rendering of
// its result — or, when the entry found its key recorded, the recorded
// answer.
func commit[P, R any](s *server, w http.ResponseWriter, r *http.Request, status int, a answer[P, R], payload P) error {
	res, rp, err := state.ProposeKeyed(stamped(r.Context(), status), s.caller(r), a.cmd, payload)
	if err != nil {
		return err
	}
	if rp != nil {
		return s.replay(w, rp.Record)
	}
	s.setIndex(w)
	writeJSON(w, status, a.render(s, res))
	return nil
}

// replay answers a recorded write again.
func (s *server) replay(w http.ResponseWriter, rec state.IdempotencyRecord) error {
	k, ok := replays[rec.Type]
	if !ok {
		return fmt.Errorf("api: no answer rendering for recorded %s", rec.Type)
	}
	body, err := k.replay(s, rec.Result)
	if err != nil {
		return fmt.Errorf("api: recorded %s result: %w", rec.Type, err)
	}
	w.Header().Set(ReplayedHeader, "true")
	s.setIndex(w)
	writeJSON(w, rec.Status, body)
	return nil
}

// answer is what a keyed write of cmd answers: the rendering of its result
// into the answer body. A replayed answer decodes the recorded result back
// into R first, so it shows the original entity (observed status, which the
// views add from the current state, is current).
type answer[P, R any] struct {
	cmd    state.Cmd[P, R]
	render func(s *server, res R) any
}

func answerOf[P, R, B any](cmd state.Cmd[P, R], f func(*server, R) B) answer[P, R] {
	return answer[P, R]{cmd: cmd, render: func(s *server, res R) any { return f(s, res) }}
}

func (a answer[P, R]) name() string { return a.cmd.Name() }

func (a answer[P, R]) replay(s *server, recorded json.RawMessage) (any, error) {
	var res R
	if err := json.Unmarshal(recorded, &res); err != nil {
		return nil, err
	}
	return a.render(s, res), nil
}

// replayer is an answer of any command, as replay finds it by the recorded
// command's name.
type replayer interface {
	name() string
	replay(s *server, recorded json.RawMessage) (any, error)
}

// The answers of every command a keyed route commits.
var (
	answerCreateNamespace     = answerOf(state.CmdCreateNamespace, pure(wireNamespace))
	answerDeleteNamespace     = answerOf(state.CmdDeleteNamespace, pure(wireNamespace))
	answerSetNamespaceQuota   = answerOf(state.CmdSetNamespaceQuota, pure(wireNamespace))
	answerPutConfiguration    = answerOf(state.CmdPutConfiguration, pure(wireConfiguration))
	answerDeleteConfiguration = answerOf(state.CmdDeleteConfiguration, pure(wireConfiguration))
	answerCreateAgent         = answerOf(state.CmdCreateAgent, (*server).agentView)
	answerUpdateAgent         = answerOf(state.CmdUpdateAgent, (*server).agentView)
	answerAdmitRevision       = answerOf(state.CmdAdmitRevision, func(s *server, a state.Admitted) wire.DeployResult {
		return wire.DeployResult{Revision: s.revisionView(a.Revision), WorkID: a.WorkID}
	})
	answerRequestStop   = answerOf(state.CmdRequestStop, (*server).workView)
	answerRequestDelete = answerOf(state.CmdRequestDelete, (*server).workView)
)

// replays finds the answers above by command name, for recorded results.
var replays = replayTable(answerCreateNamespace, answerDeleteNamespace, answerSetNamespaceQuota, answerPutConfiguration,
	answerDeleteConfiguration, answerCreateAgent, answerUpdateAgent, answerAdmitRevision, answerRequestStop,
	answerRequestDelete, answerCreateCredential, answerRotateCredential, answerWithdrawCredential,
	answerSetNamespaceLabels, answerSetConfigurationLabels, answerSetAgentLabels)

func replayTable(answers ...replayer) map[string]replayer {
	out := make(map[string]replayer, len(answers))
	for _, a := range answers {
		out[a.name()] = a
	}
	return out
}

// pure adapts a conversion that needs no server.
func pure[T, B any](f func(T) B) func(*server, T) B {
	return func(_ *server, t T) B { return f(t) }
}
