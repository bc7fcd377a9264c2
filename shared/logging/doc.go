// Package logging provides oce's JSON logs: one slog record per line, a
// redacting handler that keeps credentials out of every record, the
// allow-list sanitizer for wrapper events (runtime.startup_phase, model
// probes, …; REFERENCE §1.2, seed 001), and an adapter that turns a child
// process's output lines into scrubbed records.
package logging
