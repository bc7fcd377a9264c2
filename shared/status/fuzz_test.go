package status

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRemoteStatusBearer checks that no Authorization value other than the
// exact bearer opens the remote-status route.
func FuzzRemoteStatusBearer(f *testing.F) {
	s := New(Options{RevisionID: testRevision, RemoteStatusKey: testKey})
	s.SetPluginStatus(PluginStatus{Phase: PluginPhaseReady})
	h := s.Handler()
	f.Add("Bearer " + tokenRev1)
	f.Add("bearer " + tokenRev1)
	f.Add("Bearer " + tokenRev2)
	f.Add("Bearer  " + tokenRev1)
	f.Add("Bearer " + strings.ToUpper(tokenRev1))
	f.Add("")
	f.Fuzz(func(t *testing.T, auth string) {
		r := httptest.NewRequest(http.MethodGet, PathRemoteStatus, nil)
		r.Header["Authorization"] = []string{auth}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		scheme, tok, _ := strings.Cut(auth, " ")
		want := http.StatusUnauthorized
		if strings.EqualFold(scheme, "Bearer") && tok == tokenRev1 {
			want = http.StatusOK
		}
		if w.Code != want {
			t.Fatalf("Authorization %q: got %d, want %d", auth, w.Code, want)
		}
	})
}

// FuzzCleanReason checks that a readiness reason is always one printable line.
func FuzzCleanReason(f *testing.F) {
	f.Add(NotReadyReason + "; startup check x failed with Y\n")
	f.Add("\x1b[31m\x00é\r\nsecond")
	f.Fuzz(func(t *testing.T, s string) {
		r := cleanReason(s)
		for _, c := range r {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("non-printable %q in %q", c, r)
			}
		}
	})
}
