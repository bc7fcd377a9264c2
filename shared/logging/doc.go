// Package logging provides oce's JSON logs: one slog record per line, a
// redacting handler that keeps credentials out of every record, the
// allow-list sanitizer for wrapper events (runtime.startup_phase, model
// probes, …; docs/design/reference.md#s1-2, docs/design/seed-001.md), and an adapter that turns a child
// process's output lines into scrubbed records.
package logging
