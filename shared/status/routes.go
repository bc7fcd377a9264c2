package status

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"runtime"

	"oce.dev/oce/shared/codes"
)

func (s *Server) routes() {
	s.handle("GET "+PathReadyz, s.readyz, AuthNone)
	s.handle("GET "+PathLivez, s.livez, AuthNone)
	s.handle("GET "+PathStartupz, s.startupz, AuthNone)
	for _, p := range []string{PathStatus, PathRuntimeStatus} {
		s.handle("GET "+p, s.status, s.opts.StatusAuth)
	}
	for _, p := range []string{PathDiagnostics, PathRuntimeDiagnostics} {
		s.handle("GET "+p, s.diagnostics, s.opts.StatusAuth)
	}
	s.handle("GET "+PathRuntimeImage, s.image, s.opts.StatusAuth)
	s.handle("GET "+PathPluginStatus, s.pluginStatus, s.opts.StatusAuth)
	s.handle("GET "+PathRemoteStatus, s.pluginStatus, AuthToken)
}

// HandleFunc adds an extra route (setup codes for gatewayd, …) guarded by
// auth. pattern uses http.ServeMux syntax ("POST /path"). It reports an
// error, instead of panicking, for an invalid or duplicate pattern.
func (s *Server) HandleFunc(pattern string, h http.HandlerFunc, auth AuthMode) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("status: register %q: %v", pattern, p)
		}
	}()
	s.handle(pattern, h, auth)
	return nil
}

// Handler returns the server's routes, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) handle(pattern string, h http.HandlerFunc, auth AuthMode) {
	s.mux.Handle(pattern, s.guard(auth, h))
}

// guard applies auth and the headers every status answer carries.
func (s *Server) guard(auth AuthMode, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !s.allowed(auth, r) {
			// No detail: the caller learns only that it was refused.
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n"))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// HeldReason is the readiness reason of a held failure:
// "<NotReadyReason>; startup check <check> failed with <CODE>".
func HeldReason(f RuntimeFailure) string {
	return fmt.Sprintf("%s; startup check %s failed with %s", NotReadyReason, f.Check, f.Code)
}

// heldReasonRe finds a HeldReason inside a longer text (kubelet reports an
// exec probe's output as "Readiness probe failed: <output>").
var heldReasonRe = regexp.MustCompile(regexp.QuoteMeta(NotReadyReason) + `; startup check ([a-z][a-z0-9-]{0,63}) failed with ([A-Z][A-Z0-9_]{0,63})`)

// ParseHeldReason finds the first HeldReason in s and returns its check and
// code; ok is false when s holds none or its code is not a runtime
// diagnostic code.
func ParseHeldReason(s string) (check string, code codes.Code, ok bool) {
	m := heldReasonRe.FindStringSubmatch(s)
	if m == nil || !codes.IsRuntimeDiagnostic(codes.Code(m[2])) {
		return "", "", false
	}
	return m[1], codes.Code(m[2]), true
}

// readyz answers from published state. In a hold it returns before looking
// at the ready check, so a poll never triggers work.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	held, ready, check, phase := s.held, s.ready, s.check, s.startingPhase()
	s.mu.RUnlock()
	notReady := NotReadyReason
	if phase != "" {
		notReady = PhaseReason(phase)
	}
	switch {
	case held != nil:
		writeText(w, http.StatusServiceUnavailable, HeldReason(*held))
		return
	case !ready:
		writeText(w, http.StatusServiceUnavailable, notReady)
		return
	}
	if check != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.ReadyCheckTimeout)
		err := check(ctx)
		cancel()
		if err != nil {
			s.log.Debug("ready check failed", "err", err)
			writeText(w, http.StatusServiceUnavailable, notReady)
			return
		}
	}
	writeText(w, http.StatusOK, "ok")
}

// livez is 200 while the process serves, held or not: a hold must not make
// kubelet restart the container.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

func (s *Server) startupz(w http.ResponseWriter, _ *http.Request) {
	s.mu.RLock()
	started := s.startupEnd || s.held != nil
	s.mu.RUnlock()
	if started {
		writeText(w, http.StatusOK, "started")
		return
	}
	writeText(w, http.StatusServiceUnavailable, "starting")
}

// snapshot builds the /status document from published state.
func (s *Server) snapshot() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	doc := make(map[string]any, len(s.sections)+8)
	for k, v := range maps.All(s.sections) {
		doc[k] = v
	}
	doc["component"] = s.opts.Component
	if s.opts.RevisionID != "" {
		doc["revisionId"] = s.opts.RevisionID
	}
	doc["ready"] = s.ready && s.held == nil
	doc["started"] = s.startupEnd || s.held != nil
	doc["held"] = s.held != nil
	if s.held != nil {
		doc["runtimeFailure"] = *s.held
	}
	if p := s.startingPhase(); p != "" {
		doc[PhaseKey] = p
	}
	if s.plugin != nil {
		doc["pluginStatus"] = *s.plugin
	}
	return doc
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.snapshot())
}

func (s *Server) diagnostics(w http.ResponseWriter, _ *http.Request) {
	doc := s.snapshot()
	doc["uptimeMs"] = s.clock().Sub(s.started).Milliseconds()
	doc["goroutines"] = runtime.NumGoroutine()
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) image(w http.ResponseWriter, _ *http.Request) {
	s.mu.RLock()
	img, ok := s.sections["image"]
	s.mu.RUnlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "NOT_PUBLISHED"})
		return
	}
	writeJSON(w, http.StatusOK, img)
}

// pluginStatus serves both the local and the remote (bearer) route.
func (s *Server) pluginStatus(w http.ResponseWriter, _ *http.Request) {
	s.mu.RLock()
	p := s.plugin
	s.mu.RUnlock()
	if p == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "NOT_PUBLISHED"})
		return
	}
	writeJSON(w, http.StatusOK, *p)
}
