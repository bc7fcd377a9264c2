package iam_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// BenchmarkAuthorize: the cost of one decision as the API makes it — a
// deployer's DeployAgent with the admitted facts — with a policy set of the
// built-in roles plus 1, 100 or 1,000 Restriction policies, every one
// scoped to DeployAgent (the worst case: none is skipped by its action
// scope) with a condition that does not hold. p50/p99 over the iterations;
// docs/PERFORMANCE.md reports them.
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			f := &fixture{t: &testing.T{}, m: state.NewMachine()}
			apply := func(typ state.Named, p any) {
				f.n++
				e, err := state.Encode(typ.Name(), t0.Add(time.Duration(f.n)*time.Second), "bootstrap", p)
				require.NoError(b, err)
				_, err = f.m.ApplyBytes(e)
				require.NoError(b, err)
			}
			apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns", Name: "team"})
			apply(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b", Role: state.RoleDeployer, NamespaceID: "ns",
				SubjectKind: state.PrincipalUser, Subject: "dan"})
			// Restrictions of 10 policies each (one when n is 1).
			per := min(n, 10)
			for r := 0; r < n/per; r++ {
				text := ""
				for i := range per {
					text += fmt.Sprintf("forbid (principal, action == Action::\"DeployAgent\", resource in Namespace::\"team\")\n"+
						"when { context.model == \"m-%d-%d\" && context.harness == \"codex\" };\n", r, i)
				}
				apply(state.CmdPutRestriction, state.PutRestriction{ID: fmt.Sprintf("r%d", r), Name: fmt.Sprintf("r-%d", r), Policy: text})
			}
			d := iam.NewCedar(f.m)
			req := iam.Request{Principal: iam.Principal{Kind: iam.KindUser, Name: "dan"}, Action: iam.DeployAgent,
				Resource: iam.AgentResource("team", state.Agent{Name: "bot", ExecutionMode: "dedicated"}, "cfg", "bot"),
				Context: map[string]any{"harness": "codex", "mode": "dedicated", "computeId": "memory",
					"harnessAuthMethod": "api_key", "credentialKind": "", "credentialSource": "secret://team/k",
					"customEndpoint": false, "provider": "openai", "model": "gpt-5.5", "plugins": []string{}}}
			ctx := context.Background()
			dec, err := d.Authorize(ctx, req)
			require.NoError(b, err)
			require.True(b, dec.Allowed, dec.Reasons)
			// Wall time includes whatever else the machine runs; the thread's
			// CPU time is the decision's own cost.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			lat := make([]time.Duration, 0, b.N)
			cpu := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				c0 := threadCPU()
				start := time.Now()
				dec, _ := d.Authorize(ctx, req)
				lat = append(lat, time.Since(start))
				cpu = append(cpu, threadCPU()-c0)
				if !dec.Allowed {
					b.Fatal("denied")
				}
			}
			b.StopTimer()
			pct := func(v []time.Duration, p int) float64 {
				slices.Sort(v)
				return float64(v[min(len(v)-1, len(v)*p/100)].Nanoseconds()) / 1e3
			}
			b.ReportMetric(pct(lat, 50), "p50-µs")
			b.ReportMetric(pct(lat, 99), "p99-µs")
			b.ReportMetric(pct(cpu, 50), "cpu-p50-µs")
			b.ReportMetric(pct(cpu, 99), "cpu-p99-µs")
		})
	}
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}
