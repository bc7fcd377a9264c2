package kubernetes

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/shared/codes"
)

// A wave's steps run at once: each of two steps waits for the other to
// have started, which steps run one after another never do.
func TestWaveRunsStepsAtOnce(t *testing.T) {
	a, b := make(chan struct{}), make(chan struct{})
	meet := func(mine, other chan struct{}) func() error {
		return func() error {
			close(mine)
			select {
			case <-other:
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("the other step never started")
			}
		}
	}
	require.NoError(t, wave(meet(a, b), meet(b, a)))
}

// The error a wave returns does not depend on which step ends first: a
// permanent one wins, else the first in step order; every step has ended
// when wave returns, a failed one cancelling none.
func TestWaveErrorIsByStepOrder(t *testing.T) {
	transientA := compute.Transient(codes.TransientDependency, errors.New("a"))
	transientB := errors.New("b")
	permanent := compute.Permanent(codes.ForeignWorkload, errors.New("foreign"))
	for _, tc := range []struct {
		name string
		errs []error // the steps' errors; each step ends after the next one has
		want error
	}{
		{"none fails", []error{nil, nil}, nil},
		{"first in order, not first to end", []error{transientA, transientB}, transientA},
		{"permanent over transient", []error{transientA, nil, permanent}, permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ended := make([]chan struct{}, len(tc.errs))
			for i := range ended {
				ended[i] = make(chan struct{})
			}
			steps := make([]func() error, len(tc.errs))
			for i, err := range tc.errs {
				steps[i] = func() error {
					defer close(ended[i])
					if i+1 < len(ended) {
						<-ended[i+1] // the later step ends first
					}
					return err
				}
			}
			err := wave(steps...)
			for i, e := range ended {
				select {
				case <-e:
				default:
					t.Fatalf("step %d had not ended when wave returned", i)
				}
			}
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Same(t, tc.want, err)
		})
	}
}
