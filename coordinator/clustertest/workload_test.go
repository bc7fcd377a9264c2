package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

const workloadNS = "load"

// apiCall runs f against the running members in turn until it succeeds or
// the deadline passes: a killed leader's requests fail and are retried on
// the next member (followers forward writes to the leader).
func (c *cluster) apiCall(ctx context.Context, f func(context.Context, *client.Client) error) error {
	deadline := time.Now().Add(clusterWait)
	var last error
	for i := 0; time.Now().Before(deadline); i++ {
		n := c.Nodes[i%len(c.Nodes)]
		if !n.running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(cctx, c.client(n))
		cancel()
		if err == nil {
			return nil
		}
		var ae *client.Error
		if errors.As(err, &ae) && ae.Status/100 == 4 && !errors.Is(err, client.ErrNotLeader) {
			return err // a real rejection, not a leadership problem
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no member answered: %w", last)
}

// setupWorkload creates the Namespace, a Configuration, the credential
// source the Agents name and n Agents.
func (c *cluster) setupWorkload(ctx context.Context, t testing.TB, n int) []string {
	t.Helper()
	require.NoError(t, c.apiCall(ctx, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.CreateNamespace(ctx, workloadNS)
		if isConflict(err) {
			return nil // an earlier attempt committed before its answer was lost
		}
		return err
	}))
	require.NoError(t, c.apiCall(ctx, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.CreateConfiguration(ctx, workloadNS, "cfg", json.RawMessage(admission.ExampleEmbeddedAnthropic))
		if isConflict(err) {
			return nil
		}
		return err
	}))
	require.NoError(t, c.apiCall(ctx, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.CreateCredentialSource(ctx, workloadNS, wire.CreateCredentialSource{Name: "model",
			Values: map[string]string{"key": "clustertest-value"}})
		if isConflict(err) {
			return nil
		}
		return err
	}))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%04d", i)
	}
	parallel(t, names, 8, func(name string) error {
		return c.apiCall(ctx, func(ctx context.Context, cl *client.Client) error {
			_, err := cl.CreateAgent(ctx, workloadNS, wire.CreateAgent{Name: name, Configuration: "cfg",
				HarnessAuth: &wire.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://load/model#key"}})
			if isConflict(err) {
				return nil
			}
			return err
		})
	})
	return names
}

func isConflict(err error) bool {
	var ae *client.Error
	return errors.As(err, &ae) && ae.Status == 409
}

// deploy deploys one Agent through any member.
func (c *cluster) deploy(ctx context.Context, name string) (wire.DeployResult, error) {
	var res wire.DeployResult
	err := c.apiCall(ctx, func(ctx context.Context, cl *client.Client) error {
		var err error
		res, err = cl.Deploy(ctx, workloadNS, name, wire.Deploy{})
		return err
	})
	return res, err
}

// parallel runs f over items with k workers and requires every call to succeed.
func parallel(t testing.TB, items []string, k int, f func(string) error) {
	t.Helper()
	require.NoError(t, parallelErr(items, k, f))
}

// parallelErr runs f over items with k workers and returns the errors joined.
func parallelErr(items []string, k int, f func(string) error) error {
	ch := make(chan string)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := f(it); err != nil {
					errs <- fmt.Errorf("%s: %w", it, err)
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// snapshotOf is the state a member reports through the API.
type snapshotOf struct {
	agents    []wire.Agent
	revisions map[string][]wire.Revision // by Agent id
	audit     []wire.AuditRecord
	work      []wire.Work
}

func (c *cluster) read(ctx context.Context, t testing.TB, n *node) snapshotOf {
	t.Helper()
	s, _, err := c.readState(ctx, n)
	require.NoError(t, err)
	return s
}

// readState reads n's state; at is the index its first read was served at
// (every later part is at least as new).
func (c *cluster) readState(ctx context.Context, n *node) (s snapshotOf, at uint64, err error) {
	cl := c.client(n)
	var m client.Meta
	if s.agents, err = cl.Agents(client.WithMeta(ctx, &m), workloadNS); err != nil {
		return s, 0, err
	}
	s.revisions = map[string][]wire.Revision{}
	for _, a := range s.agents {
		revs, err := cl.Revisions(ctx, workloadNS, a.ID)
		if err != nil {
			return s, 0, err
		}
		s.revisions[a.ID] = revs
	}
	for after := int64(0); ; {
		recs, err := cl.Audit(ctx, after, 1000)
		if err != nil {
			return s, 0, err
		}
		if len(recs) == 0 {
			break
		}
		s.audit = append(s.audit, recs...)
		after = recs[len(recs)-1].Seq
	}
	s.work, err = cl.Work(ctx, client.WorkFilter{})
	return s, m.Index, err
}

// stateChangeWait bounds one blocking query of awaitState: a state that
// waits on time alone (work backing off) is read again after it.
const stateChangeWait = 5 * time.Second

// awaitState reads n's state until unmet finds nothing missing ("" — the
// snapshot's unsettled or notServing), reading again each time the state
// changes (a blocking query on the index it was read at, not a timer). After
// clusterWait it fails the test with what was still missing or the last
// error; it never fails from another goroutine.
func (c *cluster) awaitState(ctx context.Context, t testing.TB, n *node, unmet func(snapshotOf) string) snapshotOf {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	cl := c.client(n)
	why, lastErr := "no read answered", error(nil)
	for {
		s, at, err := c.readState(ctx, n)
		if err == nil {
			if why = unmet(s); why == "" {
				return s
			}
			_, err = cl.WaitIndex(ctx, at, stateChangeWait)
		}
		if err != nil && ctx.Err() == nil {
			lastErr = err
			select { // a refused read is retried at the pace of the polls
			case <-ctx.Done():
			case <-time.After(pollEvery):
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s's state did not get there within %s: %s (last error: %v)", n.ID, clusterWait, why, lastErr)
		}
	}
}

// notServing says what keeps the engine's health watcher from having
// observed every Agent's active revision serving ("" when nothing): its
// observation is a state change too, seconds after the activation. (The
// members share the memory driver's records, so a new leader observes the
// runtimes its predecessors started.)
func (s snapshotOf) notServing() string {
	for _, a := range s.agents {
		if a.Status == nil {
			return "agent " + a.Name + " has no status"
		}
		if a.Status.State != wire.AgentServing {
			return "agent " + a.Name + " is " + a.Status.State
		}
	}
	return s.unsettled()
}

// unsettled says what keeps the state from being settled — an Agent without
// an active revision, work queued or claimed ("" when nothing).
func (s snapshotOf) unsettled() string {
	for _, a := range s.agents {
		if a.ActiveRevisionID == "" {
			return "agent " + a.Name + " has no active revision"
		}
	}
	for _, w := range s.work {
		if w.State == wire.WorkQueued || w.State == wire.WorkClaimed {
			return "work " + w.ID + " is " + w.State + " (" + w.LastCode + ")"
		}
	}
	return ""
}

// checkInvariants: every Agent has exactly one active revision, which is
// its activeRevisionId and the newest it was deployed; every activated
// revision has exactly one activate audit record.
func (s snapshotOf) checkInvariants(t testing.TB, wantAgents int) {
	t.Helper()
	require.Len(t, s.agents, wantAgents)
	activations := map[string]int{}
	for _, r := range s.audit {
		if r.Action == wire.AuditActivate {
			activations[r.RevisionID]++
		}
	}
	for _, a := range s.agents {
		var active []string
		for _, r := range s.revisions[a.ID] {
			if r.Status == wire.RevisionActive {
				active = append(active, r.ID)
			}
		}
		require.Equal(t, []string{a.ActiveRevisionID}, active, "agent %s: exactly one active revision", a.Name)
		require.Equal(t, 1, activations[a.ActiveRevisionID], "agent %s: one activate audit record", a.Name)
	}
	for rev, n := range activations {
		require.Equal(t, 1, n, "revision %s activated %d times", rev, n)
	}
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
