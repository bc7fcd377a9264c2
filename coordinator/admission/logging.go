package admission

// DefaultLogLevel is stamped when Input.LogLevel is empty.
const DefaultLogLevel = "info"

// logLevels are OpenClaw's logging.level values.
var logLevels = map[string]bool{
	"silent": true, "fatal": true, "error": true, "warn": true, "info": true, "debug": true, "trace": true,
}

// stampLogging applies the platform-owned native logging policy (docs/design/seed-001.md):
// logging.level and a matching logging.consoleLevel, JSON console style,
// native OTLP log export off (diagnostics.otel.logs=false), and no retired
// logging.redactSensitive key (redaction is always on in the runtime).
// decodeTree has checked that logging, diagnostics and diagnostics.otel are
// objects when present.
func stampLogging(tree map[string]any, level string) {
	logging := ensureObject(tree, "logging")
	logging["level"] = level
	logging["consoleLevel"] = level
	logging["consoleStyle"] = "json"
	delete(logging, "redactSensitive")
	otel := ensureObject(ensureObject(tree, "diagnostics"), "otel")
	otel["logs"] = false
}
