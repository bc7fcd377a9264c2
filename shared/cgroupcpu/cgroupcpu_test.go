package cgroupcpu

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func psi(someUs, fullUs int) string {
	return "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + itoa(someUs) + "\n" +
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=" + itoa(fullUs) + "\n"
}

func stat(throttledUs int) string {
	return "usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 5\nnr_throttled 1\nthrottled_usec " +
		itoa(throttledUs) + "\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
}

func remove(t *testing.T, dir, name string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(dir, name)))
}

func ms(n int64) *int64 { return &n }

// The 13 counter cases of docs/design/reference.md#s9 (runtime-probe-cpu-counter): metric
// choice, missing files, reset, the metric fixed at start, the starved /
// timeout split and the cap for several quotas.
func TestCPUCounterCases(t *testing.T) {
	type files map[string]string
	cases := []struct {
		name       string
		start      files    // files present when the counter is created
		later      files    // files written after creation
		gone       []string // files removed after creation
		wantMetric Metric
		wantWait   *int64
	}{
		{name: "1 pressure preferred over stat",
			start:      files{"cpu.pressure": psi(1_000_000, 5), "cpu.stat": stat(7_000_000)},
			later:      files{"cpu.pressure": psi(3_500_000, 9), "cpu.stat": stat(9_000_000)},
			wantMetric: MetricPressure, wantWait: ms(2500)},
		{name: "2 stat fallback when pressure is missing",
			start: files{"cpu.stat": stat(1_000)}, later: files{"cpu.stat": stat(41_000)},
			wantMetric: MetricThrottled, wantWait: ms(40)},
		{name: "3 pressure without a some line falls back to stat",
			start:      files{"cpu.pressure": "full avg10=0 total=5\n", "cpu.stat": stat(0)},
			later:      files{"cpu.stat": stat(2_000_000)},
			wantMetric: MetricThrottled, wantWait: ms(2000)},
		{name: "4 both files missing gives null",
			start: files{}, later: files{"cpu.pressure": psi(5_000_000, 0)},
			wantMetric: MetricNone, wantWait: nil},
		{name: "5 chosen file removed gives null",
			start: files{"cpu.pressure": psi(10, 0), "cpu.stat": stat(10)}, gone: []string{"cpu.pressure"},
			wantMetric: MetricPressure, wantWait: nil},
		{name: "6 pressure reset gives null",
			start: files{"cpu.pressure": psi(9_000_000, 0)}, later: files{"cpu.pressure": psi(1_000, 0)},
			wantMetric: MetricPressure, wantWait: nil},
		{name: "7 throttled reset gives null",
			start: files{"cpu.stat": stat(9_000_000)}, later: files{"cpu.stat": stat(0)},
			wantMetric: MetricThrottled, wantWait: nil},
		{name: "8 metric fixed at start: pressure appearing later is ignored",
			start:      files{"cpu.stat": stat(1_000_000)},
			later:      files{"cpu.pressure": psi(90_000_000, 0), "cpu.stat": stat(1_500_000)},
			wantMetric: MetricThrottled, wantWait: ms(500)},
		{name: "9 metric fixed at start: no switch to stat when pressure disappears",
			start: files{"cpu.pressure": psi(0, 0), "cpu.stat": stat(0)},
			later: files{"cpu.stat": stat(8_000_000)}, gone: []string{"cpu.pressure"},
			wantMetric: MetricPressure, wantWait: nil},
		{name: "10 unchanged counter gives zero, not null",
			start:      files{"cpu.pressure": psi(42, 0)},
			wantMetric: MetricPressure, wantWait: ms(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for n, b := range tc.start {
				write(t, root, n, b)
			}
			w := NewWaitCounter(root)
			for n, b := range tc.later {
				write(t, root, n, b)
			}
			for _, n := range tc.gone {
				remove(t, root, n)
			}
			require.Equal(t, tc.wantMetric, w.Metric())
			require.Equal(t, tc.wantWait, w.Since())
		})
	}

	t.Run("11 starved/timeout split at elapsed/4", func(t *testing.T) {
		for _, c := range []struct {
			elapsed time.Duration
			wait    *int64
			starved bool
		}{
			{65 * time.Second, ms(16_251), true},
			{65 * time.Second, ms(16_250), false}, // exactly a quarter is not "more than"
			{65 * time.Second, ms(0), false},
			{65 * time.Second, nil, false}, // unknown wait is a timeout
			{110 * time.Second, ms(100_000), true},
		} {
			require.Equal(t, c.starved, Starved(c.elapsed, c.wait), "elapsed %v wait %v", c.elapsed, c.wait)
		}
	})

	t.Run("12 cap formula for cpu.max quotas", func(t *testing.T) {
		for _, c := range []struct {
			cpuMax string
			cap    time.Duration
		}{
			{"max 100000", 65 * time.Second},
			{"100000 100000", 65 * time.Second},
			{"200000 100000", 65 * time.Second}, // more than a core still counts as one
			{"50000 100000", 110 * time.Second},
			{"25000 100000", 200 * time.Second},
			{"30000 100000", 20*time.Second + 150000*time.Millisecond},
			{"33333 100000", 20*time.Second + 135002*time.Millisecond}, // ceil(45000/0.33333)
		} {
			root := t.TempDir()
			write(t, root, "cpu.max", c.cpuMax+"\n")
			share, ok := QuotaAt(root)
			require.True(t, ok, c.cpuMax)
			require.Equal(t, c.cap, ProbeCap(share), c.cpuMax)
		}
	})

	t.Run("13 cap ceiling of 600 s and unreadable cpu.max", func(t *testing.T) {
		for _, body := range []string{"5000 100000", "1000 100000", "1 100000"} {
			root := t.TempDir()
			write(t, root, "cpu.max", body)
			share, ok := QuotaAt(root)
			require.True(t, ok)
			require.Equal(t, 600*time.Second, ProbeCap(share), body)
		}
		for _, body := range []string{"", "abc 100000", "0 100000", "100 0", "1 2 3", "max -5"} {
			root := t.TempDir()
			write(t, root, "cpu.max", body)
			_, ok := QuotaAt(root)
			require.False(t, ok, "%q", body)
		}
		_, ok := QuotaAt(t.TempDir())
		require.False(t, ok, "missing cpu.max")
		// An unknown share (ok=false callers pass 0) is one core.
		require.Equal(t, 65*time.Second, ProbeCap(0))
	})
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "50000 100000", "", "0 0", "max"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		share, err := parseCPUMax(s)
		if err != nil {
			return
		}
		require.Greater(t, share, 0.0)
		c := ProbeCap(share)
		require.GreaterOrEqual(t, c, 65*time.Second)
		require.LessOrEqual(t, c, ProbeCeiling)
	})
}

func FuzzParseCounters(f *testing.F) {
	f.Add(psi(5, 6))
	f.Add(stat(7))
	f.Add("some total=")
	f.Fuzz(func(t *testing.T, s string) {
		// Must never panic; a value is returned only with a nil error.
		if v, err := parsePressure(s); err != nil {
			require.Zero(t, v)
		}
		if v, err := parseThrottled(s); err != nil {
			require.Zero(t, v)
		}
	})
}

// BenchmarkWaitCounter measures one start-plus-read of the CPU wait counter
// (two small file reads), the overhead the probe adds around its spawn.
func BenchmarkWaitCounter(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cpu.pressure"), []byte(psi(1000, 0)), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if NewWaitCounter(root).Since() == nil {
			b.Fatal("nil wait")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/measure")
}
