package server

import (
	"log/slog"
	"net/http"

	"oce.dev/oce/coordinator/console"
)

// withConsole serves the web console under /console beside the API, on the
// same listeners and TLS: the console calls the API in process with each
// user's token, so the API's authenticator and IAM decide every request —
// and, asked through GET …/access, what each page offers.
func withConsole(apiH http.Handler, log *slog.Logger) http.Handler {
	c, err := console.New(console.Config{API: apiH, Log: log.With("component", "console")})
	if err != nil {
		// the templates are embedded and tested: this is a build defect
		log.Error("console disabled", "error", err.Error())
		return apiH
	}
	return console.Mount(apiH, c)
}
