package admission_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/state"
)

func ExampleAdmit() {
	out, err := admission.Admit(admission.Input{
		Agent: state.Agent{ID: "a1", NamespaceID: "ns", ExecutionMode: state.ModeDedicated, ConfigurationID: "c1",
			HarnessAuth: &state.HarnessAuth{Method: admission.AuthAPIKey, CredentialKind: admission.KindSecret, SourceRef: "secret://ns/openai#key"}},
		Configuration: state.Configuration{ID: "c1", NamespaceID: "ns", Document: json.RawMessage(admission.ExampleCustomEndpoint)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var rendered struct {
		Agents struct {
			Defaults struct {
				Model struct{ Primary string }
			}
		}
	}
	_ = json.Unmarshal(out.Rendered, &rendered)
	fmt.Println(out.Harness.ID, out.Harness.Version, out.Mode, out.Primary, out.Fallbacks)
	fmt.Println(rendered.Agents.Defaults.Model.Primary)

	// The same Agent in embedded mode is refused: Codex runs only dedicated.
	in := admission.Input{
		Agent:         state.Agent{ID: "a1", NamespaceID: "ns", ExecutionMode: state.ModeEmbedded, ConfigurationID: "c1", HarnessAuth: &state.HarnessAuth{Method: admission.AuthAPIKey}},
		Configuration: state.Configuration{ID: "c1", NamespaceID: "ns", Document: json.RawMessage(admission.ExampleCustomEndpoint)},
	}
	_, err = admission.Admit(in)
	var ae *admission.Error
	fmt.Println(errors.As(err, &ae), ae.Status, ae.Code, ae.Rule(), errors.Is(err, admission.ErrConflict))
	// Output:
	// codex 0.169.0 dedicated codex/vendor/org/model [codex/vendor/org/model-mini]
	// codex/openai-compatible/vendor/org/model
	// true 409 RESOURCE_CONFLICT mode-mismatch true
}
