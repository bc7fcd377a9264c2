package iam_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// FuzzParseRestriction: any text either parses into forbid policies valid
// against the schema, or is refused with a *PolicyError whose line lies in
// the text; what parses can be evaluated without a panic.
func FuzzParseRestriction(f *testing.F) {
	for _, s := range []string{
		`forbid (principal, action == Action::"DeployAgent", resource in Namespace::"team") when { context.harness == "codex" };`,
		`forbid (principal in Group::"contractors", action in Action::"administer", resource);`,
		`forbid (principal, action, resource) unless { resource has namespace && resource.namespace == Namespace::"a" };`,
		`forbid (principal, action == Action::"DeployAgent", resource) when { context.customEndpoint || context.plugins.contains("x") };`,
		`permit (principal, action, resource);`,
		"forbid (principal, action, resource)\nwhen { context.nope == 1 ",
		`@id("x") forbid (principal == User::"alice", action == Action::"StopAgent", resource is Agent);`,
		"", "//", "forbid", `forbid (principal, action == Action::"DeployAgent", resource) when { 1 + "a" };`,
	} {
		f.Add(s)
	}
	m := state.NewMachine()
	d := iam.NewCedar(m)
	f.Fuzz(func(t *testing.T, text string) {
		list, err := iam.ParseRestriction("fuzz", text)
		if err != nil {
			var pe *iam.PolicyError
			require.True(t, errors.As(err, &pe), "%T %v", err, err)
			require.GreaterOrEqual(t, pe.Line, 1)
			require.LessOrEqual(t, pe.Line, countLines(text)+1, "the line names a line of the text")
			return
		}
		require.NotEmpty(t, list)
		require.NoError(t, d.ValidateRestriction(text))
		// Evaluating every valid Restriction is safe (fail-closed is fine).
		_, err = d.Authorize(context.Background(), iam.Request{Principal: iam.Principal{Kind: iam.KindUser, Name: "u"},
			Action: iam.DeployAgent, Resource: iam.Scoped(iam.TypeAgent, "team", "bot", nil),
			Context: map[string]any{"harness": "codex", "mode": "dedicated", "customEndpoint": false,
				"plugins": []string{"x"}}})
		require.NoError(t, err)
	})
}

func countLines(s string) int {
	n := 1
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			n++
		}
	}
	return n
}
