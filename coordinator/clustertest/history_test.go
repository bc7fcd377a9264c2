package clustertest

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model the chaos suite checks recorded histories against: per Agent, a
// register of (revision count, active revision number). A deploy admits
// revision count+1 and answers its number; a linearizable read answers the
// count as it is and an active number at least the last one read and at
// most the count — the engine activates revisions on its own, and only ever
// newer ones, so a read may observe any such advance.

// opKind tells deploys from reads.
type opKind int

const (
	opDeploy opKind = iota
	opRead
)

// opInput is an operation's input.
type opInput struct {
	kind  opKind
	agent string
	key   string // a deploy's Idempotency-Key
}

// opOutput is an operation's output. A deploy whose outcome stayed unknown
// (every attempt failed) has known false: it may or may not have applied.
type opOutput struct {
	known    bool
	number   int64  // a deploy's revision number
	count    int64  // a read's revision count
	active   int64  // a read's active revision number (0: none)
	activeID string // a read's active revision id, resolved to active after the run
}

// register is the model state of one Agent.
type register struct{ count, active int64 }

var agentModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var agents []string
		for _, op := range h {
			a := op.Input.(opInput).agent
			if _, ok := by[a]; !ok {
				agents = append(agents, a)
			}
			by[a] = append(by[a], op)
		}
		slices.Sort(agents)
		out := make([][]porcupine.Operation, 0, len(agents))
		for _, a := range agents {
			out = append(out, by[a])
		}
		return out
	},
	Init: func() []any { return []any{register{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(register), input.(opInput), output.(opOutput)
		switch in.kind {
		case opDeploy:
			next := register{count: s.count + 1, active: s.active}
			if !out.known {
				return []any{s, next} // applied or not
			}
			if out.number == next.count {
				return []any{next}
			}
		case opRead:
			if out.count == s.count && out.active >= s.active && out.active <= out.count {
				return []any{register{count: out.count, active: out.active}}
			}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(opInput), output.(opOutput)
		switch {
		case in.kind == opRead:
			return fmt.Sprintf("read(%s) → count %d, active %d", in.agent, out.count, out.active)
		case !out.known:
			return fmt.Sprintf("deploy(%s) → unknown", in.agent)
		}
		return fmt.Sprintf("deploy(%s) → %d", in.agent, out.number)
	},
	DescribeState: func(state any) string {
		s := state.(register)
		return fmt.Sprintf("count %d, active %d", s.count, s.active)
	},
}

// history collects operations from concurrent clients; times are
// nanoseconds on the monotonic clock since start.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

func (h *history) add(client int, in opInput, call int64, out opOutput, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// addUnknown records an operation whose outcome stayed unknown: it may take
// effect at any time after its call.
func (h *history) addUnknown(client int, in opInput, call int64) {
	h.add(client, in, call, opOutput{}, math.MaxInt64)
}

func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}
