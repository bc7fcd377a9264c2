package monitoring

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// promtoolBuildTimeout bounds scripts/promtool.sh: a cold build from the
// module proxy takes minutes on 2 shared cores.
const promtoolBuildTimeout = 30 * time.Minute

var promtoolOnce = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), promtoolBuildTimeout)
	defer cancel()
	// scripts/promtool.sh returns at once when the cached build matches its
	// stamp and builds it otherwise: a missing promtool is installed, never
	// skipped.
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "..", "scripts", "promtool.sh"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/promtool.sh: %w\n%s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	bin := strings.TrimSpace(lines[len(lines)-1])
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("scripts/promtool.sh printed %q, no executable (stderr: %s)", bin, errb.String())
	}
	return bin, nil
})

// promtool is the pinned promtool's path.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := promtoolOnce()
	require.NoError(t, err)
	return bin
}

// runPromtool runs promtool with args in dir and returns its combined
// output and its error (an *exec.ExitError when it refused).
func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	return execPromtool(t.Context(), promtool(t), dir, args...)
}

// execPromtool runs bin with args in dir (bounded: promtool reads local
// files only).
func execPromtool(ctx context.Context, bin, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ruleGroups is the PrometheusRule's spec.groups as the YAML of a
// Prometheus rules file ({groups: [...]}), every field kept as written.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("prometheusrule.yaml")
	require.NoError(t, err)
	var pr struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &pr))
	require.NotEmpty(t, pr.Spec.Groups)
	out, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	require.NoError(t, err)
	return out
}

// unitTestFiles are the promtool rule unit tests under testdata.
func unitTestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*_test.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// unitTestDir is a directory holding rules (as rules.yaml, the name the
// unit tests' rule_files give) and a copy of every unit test file.
func unitTestDir(t *testing.T, rules []byte) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600))
	for _, f := range unitTestFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600))
	}
	return dir
}

// unitTestFile is a promtool rule unit test file, as far as the coverage
// check reads it.
type unitTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `json:"eval_time"`
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestRulesPromtool runs the real promtool over the PrometheusRule: the
// rules check (what Prometheus does when it loads them), the unit tests of
// testdata for every alert, and a broken rule the unit tests must catch.
func TestRulesPromtool(t *testing.T) {
	rules := ruleGroups(t)
	var alerts []string
	var parsed struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(rules, &parsed))
	for _, g := range parsed.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	require.Len(t, alerts, 9)

	t.Run("check rules", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600))
		out, err := runPromtool(t, dir, "check", "rules", "--lint=all", "--lint-fatal", "rules.yaml")
		require.NoError(t, err, out)
		require.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(alerts)))
	})

	t.Run("check rules refuses a bad expression", func(t *testing.T) {
		dir := t.TempDir()
		bad := bytes.Replace(rules, []byte("max by (namespace) (oce_raft_leader"), []byte("max by (namespace) oce_raft_leader ("), 1)
		require.NotEqual(t, rules, bad)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), bad, 0o600))
		out, err := runPromtool(t, dir, "check", "rules", "rules.yaml")
		require.Error(t, err, out)
		require.Contains(t, out, "parse error")
	})

	t.Run("every alert fires and stays quiet in a unit test", func(t *testing.T) {
		fires, quiet := map[string]bool{}, map[string]bool{}
		for _, f := range unitTestFiles(t) {
			var u unitTestFile
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(b, &u), f) // promtool reads it strictly
			require.Equal(t, []string{"rules.yaml"}, u.RuleFiles, f)
			for _, tg := range u.Tests {
				require.NotEmpty(t, tg.Name, f)
				groupFires := map[string]bool{}
				for _, c := range tg.AlertRuleTest {
					require.Contains(t, alerts, c.Alertname, "%s: %s", f, tg.Name)
					if len(c.ExpAlerts) > 0 {
						fires[c.Alertname] = true
						groupFires[c.Alertname] = true
						for _, a := range c.ExpAlerts {
							require.Contains(t, a, "exp_labels", "%s: %s", f, tg.Name)
							require.Contains(t, a, "exp_annotations", "%s: %s: annotations are part of the alert", f, tg.Name)
						}
					}
				}
				// A group where an alert never fires is its healthy case.
				for _, c := range tg.AlertRuleTest {
					if !groupFires[c.Alertname] {
						quiet[c.Alertname] = true
					}
				}
			}
		}
		for _, a := range alerts {
			require.True(t, fires[a], "no unit test in testdata fires %s", a)
			require.True(t, quiet[a], "no unit test in testdata has a healthy case for %s", a)
		}
	})

	t.Run("test rules", func(t *testing.T) {
		dir := unitTestDir(t, rules)
		args := []string{"test", "rules"}
		for _, f := range unitTestFiles(t) {
			args = append(args, filepath.Base(f))
		}
		out, err := runPromtool(t, dir, args...)
		require.NoError(t, err, out)
		require.Equal(t, len(unitTestFiles(t)), strings.Count(out, "  SUCCESS"), out)
	})

	// The unit tests are not vacuous: OceNoLeader waiting longer than the
	// minute they expect fails them.
	t.Run("test rules catches a changed rule", func(t *testing.T) {
		slow := bytes.Replace(rules, []byte("for: 1m"), []byte("for: 2m"), 1)
		require.NotEqual(t, rules, slow)
		dir := unitTestDir(t, slow)
		out, err := runPromtool(t, dir, "test", "rules", "raft_test.yaml")
		require.Error(t, err, out)
		require.Contains(t, out, "OceNoLeader")
		require.True(t, slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			return strings.Contains(l, "FAILED")
		}), out)
	})
}
