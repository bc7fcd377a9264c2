package browser

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/netns"
)

// TestMain runs the browser inside a loopback-only network namespace: no
// traffic can leave 127.0.0.0/8 whatever Chromium tries.
func TestMain(m *testing.M) { netns.Main(m, netns.Options{PrivateTmp: true}) }

// TestStartsAndRendersALocalPage: the browser starts with the test flags and
// renders a page from a loopback server (the console's tests rely on it).
func TestStartsAndRendersALocalPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>t</title><p id="x">hello</p>`))
	}))
	defer srv.Close()
	b, err := Start(t.Context())
	require.NoError(t, err)
	defer b.Close()
	start := time.Now()
	require.NoError(t, chromedp.Do(b.Ctx, chromedp.Navigate(srv.URL)))
	text, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS("#x")))
	require.NoError(t, err)
	png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	t.Logf("first page in %s", time.Since(start))
	require.Equal(t, "hello", text)
	require.Equal(t, []byte("\x89PNG"), png[:4])
}
