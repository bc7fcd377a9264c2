package state

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proposerFunc is a Proposer that answers with a fixed result.
type proposerFunc func(typ string, payload any) (any, error)

func (f proposerFunc) Propose(_ context.Context, typ string, payload any) (any, error) {
	return f(typ, payload)
}

// TestProposeTypesTheResult: Propose hands the command's name and payload to
// the proposer and returns Apply's result as the command's result type; a
// result of another type or an unexpected replay is an error, and
// ProposeKeyed returns a replay as such.
func TestProposeTypesTheResult(t *testing.T) {
	m := NewMachine()
	local := proposerFunc(func(typ string, payload any) (any, error) {
		b, err := Encode(typ, t0, "alice", payload)
		require.NoError(t, err)
		return m.ApplyBytes(b)
	})
	ns, err := Propose(context.Background(), local, CmdCreateNamespace, CreateNamespace{ID: "ns1", Name: "one"})
	require.NoError(t, err)
	require.Equal(t, Namespace{ID: "ns1", Name: "one", CreatedAt: t0}, ns)
	_, err = Propose(context.Background(), local, CmdCreateNamespace, CreateNamespace{ID: "ns1", Name: "one"})
	require.ErrorIs(t, err, ErrConflict)

	wrong := proposerFunc(func(string, any) (any, error) { return Agent{}, nil })
	_, err = Propose(context.Background(), wrong, CmdCreateNamespace, CreateNamespace{})
	require.ErrorContains(t, err, "CreateNamespace returned state.Agent, want state.Namespace")

	rec := IdempotencyRecord{Key: "k", Type: CmdCreateNamespace.Name(), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	replayed := proposerFunc(func(string, any) (any, error) { return &Replay{Record: rec}, nil })
	_, rp, err := ProposeKeyed(context.Background(), replayed, CmdCreateNamespace, CreateNamespace{})
	require.NoError(t, err)
	require.Equal(t, rec, rp.Record)
	_, err = Propose(context.Background(), replayed, CmdCreateNamespace, CreateNamespace{})
	require.ErrorContains(t, err, "no idempotency key was expected")
}

// TestEveryCommandIsDeclaredOnce: the table declares each name once, and
// Apply knows exactly the declared commands.
func TestEveryCommandIsDeclaredOnce(t *testing.T) {
	require.Panics(t, func() { def("CreateNamespace", applyCreateNamespace) })
	require.Len(t, handlers, 51, "the 51 commands of the log")
	for name := range handlers {
		_, err := NewMachine().ApplyCommand(Command{Type: name, Time: t0})
		require.ErrorIs(t, err, ErrInvalid, "%s without a payload", name)
		require.ErrorContains(t, err, "missing payload", name)
	}
}
