// Command oidc-provider is the OpenID provider the console's single sign-on
// test runs on loopback: the OpenID-certified github.com/zitadel/oidc/v3 op
// package with that module's example in-memory storage, plus what the test
// needs and the example lacks — clients and users from files, a groups
// claim, and accounts an operator disables by editing the users file (the
// provider then refuses the account's logins, refresh grants and userinfo).
// It is its own module so the main module's `go ./...` never compiles it;
// build.sh builds and caches it.
//
// Usage: oidc-provider --config FILE [--listen 127.0.0.1:0] [--tls-cert FILE --tls-key FILE]
//
// The config (JSON, mode 0600: it holds client secrets) names the clients
// and the users file; the users file (JSON, 0600: it holds passwords) maps
// user names to {"password", "groups", "disabled"} and is read again when it
// changes. With --tls-cert and --tls-key it serves HTTPS (the issuer is
// https://<listen address>: what a coordinator whose chart refuses a plain
// HTTP issuer is configured with); else HTTP. Once listening the provider
// prints "issuer <url>" on stdout.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// ScopeGroups asks for the groups claim.
const ScopeGroups = "groups"

type config struct {
	Clients []struct {
		ID                     string   `json:"id"`
		Secret                 string   `json:"secret"`
		RedirectURIs           []string `json:"redirectURIs"`
		PostLogoutRedirectURIs []string `json:"postLogoutRedirectURIs"`
	} `json:"clients"`
	UsersFile string `json:"usersFile"`
}

type userRecord struct {
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
	Disabled bool     `json:"disabled"`
}

// users is the users file, read again whenever its modification time or
// size changes. A disabled account is absent.
type users struct {
	path string

	mu    sync.Mutex
	stamp string
	recs  map[string]userRecord
}

func (u *users) load() map[string]userRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	st, err := os.Stat(u.path)
	if err != nil {
		slog.Error("users file", "error", err.Error())
		return nil
	}
	stamp := fmt.Sprint(st.ModTime().UnixNano(), st.Size())
	if stamp == u.stamp {
		return u.recs
	}
	b, err := os.ReadFile(u.path)
	var recs map[string]userRecord
	if err == nil {
		err = json.Unmarshal(b, &recs)
	}
	if err != nil {
		slog.Error("users file", "error", err.Error())
		return u.recs
	}
	u.stamp, u.recs = stamp, recs
	return recs
}

func (u *users) active(name string) (userRecord, bool) {
	r, ok := u.load()[name]
	return r, ok && !r.Disabled
}

// GetUserByID implements storage.UserStore; the id is the user name.
func (u *users) GetUserByID(id string) *storage.User {
	r, ok := u.active(id)
	if !ok {
		return nil
	}
	return &storage.User{ID: id, Username: id, Password: r.Password, FirstName: id, Email: id + "@example.invalid",
		EmailVerified: true, PreferredLanguage: language.English}
}

// GetUserByUsername implements storage.UserStore.
func (u *users) GetUserByUsername(name string) *storage.User { return u.GetUserByID(name) }

// ExampleClientID implements storage.UserStore.
func (u *users) ExampleClientID() string { return "service" }

// store adds groups, post-logout redirects and disabled accounts to the
// example storage.
type store struct {
	*storage.Storage
	users    *users
	postURIs map[string][]string
}

// GetClientByClientID implements op.Storage.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{Client: c, post: s.postURIs[id]}, nil
}

// SetUserinfoFromRequest implements op.CanSetUserinfoFromRequest: the ID
// token's claims.
func (s *store) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, tr op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, tr, scopes); err != nil {
		return err
	}
	s.addGroups(ui, tr.GetSubject(), scopes)
	return nil
}

// SetUserinfoFromToken implements op.Storage: the userinfo endpoint.
func (s *store) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	s.addGroups(ui, ui.Subject, []string{ScopeGroups})
	return nil
}

func (s *store) addGroups(ui *oidc.UserInfo, sub string, scopes []string) {
	if !slices.Contains(scopes, ScopeGroups) {
		return
	}
	if r, ok := s.users.active(sub); ok {
		ui.AppendClaims("groups", append([]string{}, r.Groups...))
	}
}

// errDisabled: the refresh token's account is disabled or gone.
var errDisabled = errors.New("the account is disabled")

// TokenRequestByRefreshToken implements op.Storage: a disabled account's
// refresh grant is refused (invalid_grant).
func (s *store) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	if _, ok := s.users.active(r.GetSubject()); !ok {
		return nil, errDisabled
	}
	return r, nil
}

// client allows the groups scope and the configured post-logout redirects.
type client struct {
	op.Client
	post []string
}

func (c client) IsScopeAllowed(scope string) bool {
	return scope == ScopeGroups || c.Client.IsScopeAllowed(scope)
}

func (c client) PostLogoutRedirectURIs() []string { return c.post }

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><meta charset="UTF-8"><title>Sign in</title></head><body>
<form method="POST" action="/login/username">
<input type="hidden" name="id" value="{{.ID}}">
<label for="username">Username</label> <input id="username" name="username" autocomplete="username">
<label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password">
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
<button id="submit" type="submit">Sign in</button>
</form></body></html>`))

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oidc-provider:", err)
		os.Exit(1)
	}
}

func readPrivate(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %v; it holds secrets and must be 0600", path, st.Mode().Perm())
	}
	return os.ReadFile(path)
}

func run() error {
	cfgPath := flag.String("config", "", "config file (JSON, 0600)")
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	tlsCert := flag.String("tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	tlsKey := flag.String("tls-key", "", "the certificate's PEM key (0600)")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	b, err := readPrivate(*cfgPath)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var cfg config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if _, err := readPrivate(cfg.UsersFile); err != nil {
		return fmt.Errorf("usersFile: %w", err)
	}
	clients := map[string]*storage.Client{}
	post := map[string][]string{}
	for _, c := range cfg.Clients {
		if c.ID == "" || c.Secret == "" || len(c.RedirectURIs) == 0 {
			return errors.New("--config: a client needs an id, a secret and redirect URIs")
		}
		clients[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
		post[c.ID] = c.PostLogoutRedirectURIs
	}
	us := &users{path: cfg.UsersFile}
	st := &store{Storage: storage.NewStorageWithClients(us, clients), users: us, postURIs: post}

	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	scheme := "http"
	var tlsCfg *tls.Config
	if *tlsCert != "" {
		if _, err := readPrivate(*tlsKey); err != nil {
			return fmt.Errorf("--tls-key: %w", err)
		}
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert: %w", err)
		}
		scheme, tlsCfg = "https", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	issuer := scheme + "://" + ln.Addr().String()
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:                key,
		DefaultLogoutRedirectURI: "/logged-out",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       []language.Tag{language.English},
	}, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return err
	}
	callback := op.AuthCallbackURL(provider)
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/username", func(w http.ResponseWriter, r *http.Request) {
		_ = loginPage.Execute(w, map[string]string{"ID": r.URL.Query().Get("authRequestID")})
	})
	mux.Handle("POST /login/username", interceptor.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "malformed form", http.StatusBadRequest)
			return
		}
		id := r.PostForm.Get("id")
		if err := st.CheckUsernamePassword(r.PostForm.Get("username"), r.PostForm.Get("password"), id); err != nil {
			slog.Info("login refused")
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginPage.Execute(w, map[string]string{"ID": id, "Error": "Wrong user name or password, or the account is disabled."})
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}))
	mux.HandleFunc("GET /logged-out", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("signed out"))
	})
	mux.Handle("/", provider)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("issuer %s\n", issuer)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
