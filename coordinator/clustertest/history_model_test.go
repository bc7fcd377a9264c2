package clustertest

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// TestAgentModel: the checker accepts linearizable histories of the Agent
// register and catches the anomalies the chaos suite looks for.
func TestAgentModel(t *testing.T) {
	deploy := func(client int, agent string, call, ret int64, number int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: opInput{kind: opDeploy, agent: agent}, Call: call,
			Output: opOutput{known: true, number: number}, Return: ret}
	}
	unknown := func(client int, agent string, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: opInput{kind: opDeploy, agent: agent}, Call: call,
			Output: opOutput{}, Return: math.MaxInt64}
	}
	read := func(client int, agent string, call, ret, count, active int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: opInput{kind: opRead, agent: agent}, Call: call,
			Output: opOutput{known: true, count: count, active: active}, Return: ret}
	}
	model := agentModel.ToModel()
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"sequential", []porcupine.Operation{deploy(0, "a", 0, 1, 1), read(1, "a", 2, 3, 1, 0), deploy(0, "a", 4, 5, 2),
			read(1, "a", 6, 7, 2, 2)}, true},
		{"concurrent deploys in either order", []porcupine.Operation{deploy(0, "a", 0, 10, 2), deploy(1, "a", 1, 9, 1)}, true},
		{"agents are independent", []porcupine.Operation{deploy(0, "a", 0, 1, 1), deploy(1, "b", 2, 3, 1)}, true},
		{"an unknown deploy that applied", []porcupine.Operation{unknown(0, "a", 0), read(1, "a", 5, 6, 1, 1)}, true},
		{"an unknown deploy that did not", []porcupine.Operation{unknown(0, "a", 0), read(1, "a", 5, 6, 0, 0)}, true},
		{"a duplicate effect", []porcupine.Operation{deploy(0, "a", 0, 1, 1), read(1, "a", 2, 3, 2, 0)}, false},
		{"two acknowledged deploys, one number", []porcupine.Operation{deploy(0, "a", 0, 1, 1), deploy(1, "a", 2, 3, 1)}, false},
		{"a lost acknowledged write", []porcupine.Operation{deploy(0, "a", 0, 1, 1), read(1, "a", 2, 3, 0, 0)}, false},
		{"a stale linearizable read", []porcupine.Operation{deploy(0, "a", 0, 1, 1), deploy(0, "a", 2, 3, 2),
			read(1, "a", 4, 5, 1, 0)}, false},
		{"the active revision going back", []porcupine.Operation{deploy(0, "a", 0, 1, 1), deploy(0, "a", 2, 3, 2),
			read(1, "a", 4, 5, 2, 2), read(1, "a", 6, 7, 2, 1)}, false},
	} {
		require.Equal(t, tc.ok, porcupine.CheckOperations(model, tc.ops), tc.name)
	}
}
