// Package admission is deployment admission for oce, a pure function from
// (Agent, Configuration, Installation, Compute driver capabilities) to the
// admitted native document an AgentRevision freezes, or a closed-code
// refusal. It implements docs/design/seed-001.md (Harness execution) and docs/design/reference.md#s3, docs/design/reference.md#s7:
// model references, agentRuntime policy resolution, the allowed (Harness,
// mode) pairs, the harnessAuth binding table, the driver env guard, the
// custom-endpoint compile and the platform logging stamp. It does no I/O,
// reads no clock and never mutates its Input.
//
// Native configuration paths it reads (OpenClaw 2026.9.6 JSON):
//
//   - agents.defaults.model: "provider/model" or {primary, fallbacks}.
//   - agents.defaults.models["provider/model" | "provider/*"].agentRuntime.id:
//     the default model policies; keys are the selectable catalog.
//   - agents.entries.<id>.model / .models[...]: Agent-entry selection and
//     policies (the roster; agents.list must be absent or empty).
//   - agents.defaults.agentRuntime, agents.entries.<id>.agentRuntime: legacy
//     whole-agent pins. OpenClaw's runtime selection ignores them, so they
//     never select a Harness; one naming another Harness than the model
//     policy resolves is refused as a conflict.
//   - models.providers.<p>: {baseUrl, api, headers, apiKey, agentRuntime,
//     models: [{id, baseUrl, api, headers, agentRuntime, ...}]}.
//   - plugins.entries.<p>: any entry makes provider <p> plugin-routed;
//     plugins.entries.codex.{enabled, config.appServer.transport}.
//   - env.<KEY>, env.vars.<KEY>, auth (must be empty), secrets.providers.
//   - logging and diagnostics.otel, which the stamp writes.
//
// Rules worth knowing:
//
//   - Policy sources per model, in order: the Agent entry's models[ref],
//     agents.defaults.models[ref], the provider's models[] entry whose id is
//     the full reference or the part after the first slash, the provider's
//     own agentRuntime. Explicit disagreement is 400 runtime-conflict.
//   - The custom-endpoint compile applies when the resolved Harness is Codex,
//     the primary provider is codex and models.providers.codex has a
//     non-blank baseUrl. Only Output.Rendered changes (see compile.go).
//   - The platform logging stamp sets logging.level and logging.consoleLevel
//     to the platform level, logging.consoleStyle "json",
//     diagnostics.otel.logs false, and removes logging.redactSensitive. Only
//     the default platform-owned logging path exists; driver-managed logging
//     is not modelled.
//   - Both startup checks call the primary model, so a document without one
//     resolves to OpenClaw but is refused at the binding check (409).
//
// Output documents are deterministic JSON: object keys sorted, numbers as
// written, no HTML escaping. docs/protocol-admission.md has the full rule
// table.
package admission
