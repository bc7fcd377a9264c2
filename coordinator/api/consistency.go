package api

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/codes"
)

// Reads you can reason about (docs/API.md, "Consistency"). Every answer
// carries IndexHeader: the Raft index of the state it was served from. A read
// chooses how fresh that state must be:
//
//   - default: this member's state, if it is fresh — it knows a leader, is
//     not replaying its log and trails the leader's commit index by a bounded
//     number of entries (the /readyz rule); else 503 NOT_READY, retryable on
//     another member.
//   - ?stale: this member's state whatever its freshness (diagnostics).
//   - ?index=N: a state that has applied at least index N (read-your-writes
//     and monotonic reads across members); a member that is behind waits up
//     to IndexWait, then answers 503 NOT_READY.
//   - ?index=N&wait=D: a blocking query — the answer waits until the state
//     passes N or D expires (at most MaxWait; a longer wait is clamped and
//     WaitClampedHeader says so), then serves whatever is current.
//   - ?consistent: linearizable — served by the leader after it confirmed
//     its leadership with a quorum and applied everything committed before
//     the read; a follower forwards it (or answers NOT_LEADER).
const (
	// IndexHeader names the applied index an answer was served at.
	IndexHeader = "X-Oce-Index"
	// WaitClampedHeader carries the wait actually used when the requested
	// one exceeded MaxWait.
	WaitClampedHeader = "X-Oce-Wait-Clamped"
	// MaxWait caps a blocking query's wait.
	MaxWait = 5 * time.Minute
	// IndexWait bounds how long a member that is behind waits to reach a
	// requested ?index without wait before answering NOT_READY.
	IndexWait = 5 * time.Second
	// indexRenders bounds the renderings of an answer whose state moved
	// while it was rendered: a second one usually names the exact index;
	// after that the index is an upper bound (a large list under a steady
	// stream of writes is not rendered again and again).
	indexRenders = 2
)

// Positions is implemented by a Backend that can place reads on the Raft
// log (coordinator/store). Without it the read modes are ignored and no
// index header is sent.
type Positions interface {
	// AppliedIndex is the index of the last entry applied to the state.
	AppliedIndex() uint64
	// LastIndex is the last index in this member's log.
	LastIndex() uint64
	// LeaderCommit is the cluster's commit index as this member knows it;
	// ok is false when it has no fresh figure from a leader.
	LeaderCommit() (uint64, bool)
	// WaitApplied waits until index n is applied (or ctx ends).
	WaitApplied(ctx context.Context, n uint64) (uint64, error)
	// WaitIndexChange waits until the applied index passes n (or ctx ends).
	WaitIndexChange(ctx context.Context, n uint64) uint64
	// ReadBarrier makes the next read linearizable (leader only).
	ReadBarrier(ctx context.Context) (uint64, error)
	// WaitLeading waits until a new leader has applied every entry of
	// earlier terms (leader only).
	WaitLeading(ctx context.Context) error
	// Fresh reports whether a default read may be served.
	Fresh() error
}

type readModeKey struct{}

// readMode is what a read asked for.
type readMode struct {
	consistent, stale bool
	index             uint64
	hasIndex          bool
	wait              time.Duration
	clamped           bool
}

// consistencyParams are the query parameters readMode takes; they are
// removed before the route's handler sees the query.
var consistencyParams = []string{"consistent", "stale", "index", "wait"}

func flag(q map[string][]string, name string) (bool, error) {
	v, ok := q[name]
	if !ok {
		return false, nil
	}
	if len(v) != 1 || (v[0] != "" && v[0] != "true") {
		return false, invalid("%s takes no value (or true)", name)
	}
	return true, nil
}

// parseReadMode reads the consistency parameters of r and strips them.
func parseReadMode(r *http.Request) (readMode, error) {
	q := r.URL.Query()
	var m readMode
	var err error
	if m.consistent, err = flag(q, "consistent"); err != nil {
		return m, err
	}
	if m.stale, err = flag(q, "stale"); err != nil {
		return m, err
	}
	if m.consistent && m.stale {
		return m, invalid("consistent and stale exclude each other")
	}
	if v, ok := q["index"]; ok {
		n, perr := strconv.ParseUint(v[0], 10, 64)
		if len(v) != 1 || perr != nil {
			return m, invalid("index must be one unsigned integer (an %s value)", IndexHeader)
		}
		m.index, m.hasIndex = n, true
	}
	if v, ok := q["wait"]; ok {
		d, perr := time.ParseDuration(v[0])
		if len(v) != 1 || perr != nil || d <= 0 {
			return m, invalid("wait must be one positive duration such as 30s or 5m")
		}
		if !m.hasIndex {
			return m, invalid("wait needs index: a blocking query waits for the state to pass an index")
		}
		if d > MaxWait {
			d, m.clamped = MaxWait, true
		}
		m.wait = d
	}
	if m.consistent && m.hasIndex {
		return m, invalid("consistent excludes index")
	}
	for _, p := range consistencyParams {
		q.Del(p)
	}
	r.URL.RawQuery = q.Encode()
	return m, nil
}

// index answers the applied index of this member's state; as a blocking
// query (?index=N&wait=D) it is how watchers learn that something changed.
func (s *server) index(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.ViewInstallation, iam.ClusterRes(), ""); err != nil {
		return err
	}
	if len(r.URL.Query()) > 0 {
		return invalid("unknown query parameter")
	}
	var i uint64
	if pos, ok := s.b.(Positions); ok {
		i = pos.AppliedIndex()
	}
	writeJSON(w, http.StatusOK, wire.Index{Index: i})
	return nil
}

// setIndex names the applied index on an answer about to be written (a
// write's answer: at least its own entry's index, for read-your-writes).
func (s *server) setIndex(w http.ResponseWriter) {
	if pos, ok := s.b.(Positions); ok {
		w.Header().Set(IndexHeader, strconv.FormatUint(pos.AppliedIndex(), 10))
	}
}

// readOpts tune a read route.
type readOpts struct {
	ungated  bool // served whatever the member's freshness (cluster diagnostics)
	streamed bool // the answer is streamed, not buffered (no re-render)
}

// consistent wraps a read route's handler with the read modes.
func (s *server) consistent(h handlerFunc, o readOpts) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m, err := parseReadMode(r)
		if err != nil {
			return err
		}
		r = r.WithContext(context.WithValue(r.Context(), readModeKey{}, m))
		pos, ok := s.b.(Positions)
		if !ok {
			return h(w, r)
		}
		if m.clamped {
			w.Header().Set(WaitClampedHeader, m.wait.String())
		}
		switch {
		case m.consistent:
			if !s.b.IsLeader() {
				leader := s.b.LeaderHTTPAddr()
				if s.cfg.ForwardWrites && leader != "" && r.Header.Get(forwardedHeader) == "" {
					r.URL.RawQuery = addParam(r.URL.RawQuery, "consistent")
					s.forward(w, r, leader)
					return nil
				}
				return notLeader(leader)
			}
			if _, err := pos.ReadBarrier(r.Context()); err != nil {
				return err
			}
		case m.hasIndex:
			if err := s.reachIndex(r.Context(), pos, m); err != nil {
				return err
			}
		case !m.stale && !o.ungated:
			if err := pos.Fresh(); err != nil {
				return notReady(err.Error(), pos)
			}
		}
		if o.streamed {
			w.Header().Set(IndexHeader, strconv.FormatUint(pos.AppliedIndex(), 10))
			return h(w, r)
		}
		return serveAtIndex(w, r, h, pos)
	}
}

func addParam(raw, p string) string {
	if raw == "" {
		return p
	}
	return raw + "&" + p
}

// reachIndex waits until the state may serve a read at m.index: applied at
// least index (or, blocking, past it, up to the wait). An index beyond
// anything this member knows the cluster to hold is refused when it knows
// the leader's commit index, retryable elsewhere when it does not.
func (s *server) reachIndex(ctx context.Context, pos Positions, m readMode) error {
	commit, certain := pos.LeaderCommit()
	known := max(pos.LastIndex(), commit)
	if m.index > known {
		if certain {
			return invalid("index %d is in the future: the cluster's commit index is %d", m.index, commit)
		}
		return notReady("this member cannot tell whether index "+strconv.FormatUint(m.index, 10)+
			" exists: no fresh commit index from a leader", pos)
	}
	if m.wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, m.wait)
		defer cancel()
		pos.WaitIndexChange(wctx, m.index)
		return ctx.Err()
	}
	wctx, cancel := context.WithTimeout(ctx, IndexWait)
	defer cancel()
	if _, err := pos.WaitApplied(wctx, m.index); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return notReady("this member has not applied index "+strconv.FormatUint(m.index, 10)+" yet", pos)
	}
	return nil
}

func notReady(why string, pos Positions) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: codes.NotReady, Message: why + "; retry on another member",
		Details: map[string]any{"appliedIndex": pos.AppliedIndex(), "retryable": true}}
}

// serveAtIndex renders the answer into a buffer and sends it with the index
// of the state it read; when the state moved during the rendering it renders
// once more. The header never names an index older than what the body
// shows (monotonic reads pass it as their floor); when the state moved
// during both renderings it is the index after the second.
func serveAtIndex(w http.ResponseWriter, r *http.Request, h handlerFunc, pos Positions) error {
	var rec *bufferedWriter
	var err error
	var at uint64
	renders := indexRenders
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		renders = 1 // only a read may be rendered again
	}
	for range renders {
		before := pos.AppliedIndex()
		rec = &bufferedWriter{header: http.Header{}}
		err = h(rec, r)
		at = pos.AppliedIndex()
		if at == before {
			break
		}
	}
	w.Header().Set(IndexHeader, strconv.FormatUint(at, 10))
	if err != nil {
		return err
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status())
	_, _ = w.Write(rec.body.Bytes()) // a client gone meanwhile cannot be told
	return nil
}

// bufferedWriter records an answer.
type bufferedWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedWriter) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}
