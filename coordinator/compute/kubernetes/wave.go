package kubernetes

import (
	"sync"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/shared/codes"
)

// wave runs independent preparation steps at once and waits for every one:
// none reads what another creates, so their round trips overlap instead of
// adding up, and the Gateway Pod — created after the wave — waits on the
// slowest step rather than on the sum (issue 27: time to the Pod created).
// The error does not depend on timing: the first permanent one in step
// order, else the first in step order. A failed step does not cancel the
// others; what they created is kept, as a retried preparation would keep it.
func wave(steps ...func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Go(func() { errs[i] = step() })
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if _, permanent := compute.ErrorCode(err, codes.TransientDependency); permanent {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// oneAfterAnother runs steps in order, stopping at the first error: how a
// revision was prepared before waves.
func oneAfterAnother(steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// SetPrepareOneByOne makes d create a revision's independent objects one
// after another instead of in one wave: the baseline BenchmarkPodCreated
// measures waves against in the same run. Not for production use.
func (d *Driver) SetPrepareOneByOne(v bool) { d.oneByOne.Store(v) }

// SetPrepareServiceFirst makes d create the Agent's Gateway Service in the
// wave before the Gateway Deployment, as it did before the Service left the
// way to the Pod: the baseline BenchmarkScale and BenchmarkPodCreated
// measure against in the same run. Not for production use.
func (d *Driver) SetPrepareServiceFirst(v bool) { d.serviceFirst.Store(v) }

// gatewayServiceFirst reports whether a baseline wants the Gateway Service
// before the Gateway: one after another always did.
func (d *Driver) gatewayServiceFirst() bool { return d.serviceFirst.Load() || d.oneByOne.Load() }
