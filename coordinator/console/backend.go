package console

import (
	"bytes"
	"io"
	"net/http"

	"oce.dev/oce/coordinator/client"
)

// inProcess is an http.RoundTripper that serves requests with the API
// handler in this process: the console is a client of the same API as occ,
// with the session's token, so every request is authenticated and
// authorized (and, on a follower, forwarded) exactly as the API does it.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &recorder{header: http.Header{}}
	// The API sees the browser's address (its source-address limits then
	// apply to the browser, not to every console user at once).
	req = req.Clone(req.Context())
	req.RemoteAddr = clientAddr(req.Context())
	req.RequestURI = req.URL.RequestURI()
	if req.Body == nil {
		req.Body = http.NoBody
	}
	t.h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{StatusCode: rec.status, Status: http.StatusText(rec.status), Header: rec.header,
		Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), ContentLength: int64(rec.body.Len()),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req}, nil
}

// recorder is the in-process response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// Flush lets streamed answers pass through.
func (r *recorder) Flush() {}

// apiClient is the API client acting with a session's token.
func (c *Console) apiClient(token string) *client.Client {
	return client.New("http://console.invalid", token, client.WithHTTPClient(&http.Client{Transport: inProcess{c.cfg.API}}))
}
