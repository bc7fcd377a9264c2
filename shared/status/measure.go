package status

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// StartTiming is how long a status server took to come up.
type StartTiming struct {
	// Listening is the time from New until the listener was open.
	Listening time.Duration
	// FirstLivez is the time from New until the first /livez answered 200.
	FirstLivez time.Duration
}

// MeasureStart creates a server with opts (Addr "127.0.0.1:0" when empty),
// serves it, and reports the time from New to listening and to the first
// served /livez. The server is stopped before it returns.
func MeasureStart(ctx context.Context, opts Options) (StartTiming, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	t0 := time.Now()
	s := New(opts)
	ln, err := s.Listen(ctx)
	if err != nil {
		return StartTiming{}, err
	}
	var st StartTiming
	st.Listening = time.Since(t0)
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-done
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+PathLivez, nil)
	if err != nil {
		return StartTiming{}, fmt.Errorf("status: measure: %w", err)
	}
	// A fresh transport: a pooled connection would hide the accept cost.
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return StartTiming{}, fmt.Errorf("status: measure: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return StartTiming{}, fmt.Errorf("status: measure: /livez answered %d", resp.StatusCode)
	}
	st.FirstLivez = time.Since(t0)
	return st, nil
}
