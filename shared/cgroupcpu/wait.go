package cgroupcpu

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Metric names the CPU wait counter a WaitCounter reads.
type Metric string

// Metrics, in order of preference.
const (
	// MetricPressure is the "some total=" line of cpu.pressure (PSI), µs.
	MetricPressure Metric = "cpu.pressure"
	// MetricThrottled is throttled_usec of cpu.stat, the fallback.
	MetricThrottled Metric = "cpu.stat"
	// MetricNone means neither counter was readable at start.
	MetricNone Metric = ""
)

// WaitCounter measures CPU wait since it was created. The metric is chosen
// once, at creation, so a file that appears or disappears later never mixes
// two counters in one measurement.
type WaitCounter struct {
	root    string
	metric  Metric
	startUs uint64
}

// NewWaitCounter picks the metric under root (cpu.pressure when readable,
// else cpu.stat throttled_usec) and records its current value.
func NewWaitCounter(root string) *WaitCounter {
	w := &WaitCounter{root: root}
	for _, m := range []Metric{MetricPressure, MetricThrottled} {
		if v, err := readMetric(root, m); err == nil {
			w.metric, w.startUs = m, v
			break
		}
	}
	return w
}

// Metric returns the counter chosen at creation (MetricNone when none).
func (w *WaitCounter) Metric() Metric { return w.metric }

// Since returns the CPU wait in milliseconds since creation, or nil when no
// counter was chosen, the chosen file is now missing or unreadable, or the
// counter went down (it was reset, so the difference means nothing).
func (w *WaitCounter) Since() (waitMs *int64) {
	if w == nil || w.metric == MetricNone {
		return nil
	}
	v, err := readMetric(w.root, w.metric)
	if err != nil || v < w.startUs {
		return nil
	}
	ms := int64(math.Round(float64(v-w.startUs) / 1000))
	return &ms
}

func readMetric(root string, m Metric) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(root, string(m)))
	if err != nil {
		return 0, err
	}
	if m == MetricPressure {
		return parsePressure(string(b))
	}
	return parseThrottled(string(b))
}

// parsePressure returns total= of the "some" line of a PSI file.
func parsePressure(s string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("cpu.pressure: bad total %q", v)
				}
				return n, nil
			}
		}
		return 0, fmt.Errorf("cpu.pressure: some line has no total")
	}
	return 0, fmt.Errorf("cpu.pressure: no some line")
}

// parseThrottled returns throttled_usec of a cpu.stat file.
func parseThrottled(s string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "throttled_usec" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu.stat: bad throttled_usec %q", f[1])
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("cpu.stat: no throttled_usec")
}
