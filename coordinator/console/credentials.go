package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// The credential sources page of a Namespace: its sources' metadata, and
// forms to create one, rotate one (a new value, its next version) and
// withdraw one. A value field is write-only: the page never renders a
// value — not after a refusal either, when the form comes back with its
// name and key only — and the API never answers one.

func (c *Console) credentialRoutes(m *http.ServeMux, ns string) {
	m.Handle("GET "+ns+"/credentials", c.page(c.credentialsPage))
	m.Handle("POST "+ns+"/credentials", c.form(c.createCredential))
	m.Handle("POST "+ns+"/credentials/{cred}/rotate", c.form(c.rotateCredential))
	m.Handle("POST "+ns+"/credentials/{cred}/withdraw", c.form(c.withdrawCredential))
}

func credentialsPath(ns string) string { return Prefix + "/ns/" + url.PathEscape(ns) + "/credentials" }

type credentialsView struct {
	Namespace                         string
	Sources                           []wire.CredentialSource
	CanCreate, CanRotate, CanWithdraw bool
	Notice, Error, ErrCode            string
	// Form is the create form after a refusal: its name and key, never
	// its value.
	Form credentialForm
}

type credentialForm struct{ Name, Key string }

func (c *Console) credentialsPage(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.showCredentials(w, r, s, http.StatusOK, credentialForm{Key: wire.CredentialValueKey}, "", "")
}

func (c *Console) showCredentials(w http.ResponseWriter, r *http.Request, s *session, status int, f credentialForm, msg, code string) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	ns := r.PathValue("ns")
	cl := c.apiClient(s.token)
	nsv, err := cl.Namespace(ctx, ns)
	if err != nil {
		return apiErr(err)
	}
	srcs, err := cl.CredentialSources(ctx, nsv.Name)
	if err != nil {
		return apiErr(err)
	}
	may := c.access(ctx, s, Resource{Namespace: nsv.Name}, ActionCreateCredential, ActionRotateCredential, ActionWithdrawCredential)
	c.render(w, status, "credentials", s, credentialsView{Namespace: nsv.Name, Sources: srcs, Form: f,
		CanCreate: may[ActionCreateCredential], CanRotate: may[ActionRotateCredential], CanWithdraw: may[ActionWithdrawCredential],
		Notice: r.URL.Query().Get("notice"), Error: msg, ErrCode: code})
	return nil
}

// createCredential creates a source with one value (the form's key, default
// "value").
func (c *Console) createCredential(w http.ResponseWriter, r *http.Request, s *session) error {
	ns := r.PathValue("ns")
	if c.refuses(r.Context(), s, ActionCreateCredential, Resource{Namespace: ns}) {
		return forbidden("create credential sources in namespace " + ns)
	}
	f := credentialForm{Name: strings.TrimSpace(r.PostForm.Get("name")), Key: strings.TrimSpace(r.PostForm.Get("key"))}
	if f.Key == "" {
		f.Key = wire.CredentialValueKey
	}
	value := strings.TrimSpace(r.PostForm.Get("value"))
	return c.credentialWrite(w, r, s, f, "created", func(ctx context.Context, cl *client.Client) error {
		_, err := cl.CreateCredentialSource(ctx, ns, wire.CreateCredentialSource{Name: f.Name, Values: map[string]string{f.Key: value}})
		return err
	})
}

// rotateCredential writes the source's next version: one value under the
// form's key (default: the source's only key).
func (c *Console) rotateCredential(w http.ResponseWriter, r *http.Request, s *session) error {
	ns, name := r.PathValue("ns"), r.PathValue("cred")
	if c.refuses(r.Context(), s, ActionRotateCredential, Resource{Namespace: ns}) {
		return forbidden("rotate credential source " + name)
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	value := strings.TrimSpace(r.PostForm.Get("value"))
	return c.credentialWrite(w, r, s, credentialForm{Key: wire.CredentialValueKey}, "rotated", func(ctx context.Context, cl *client.Client) error {
		if key == "" {
			src, err := cl.CredentialSource(ctx, ns, name)
			if err != nil {
				return err
			}
			key = wire.CredentialValueKey
			if len(src.Keys) == 1 {
				key = src.Keys[0]
			}
		}
		_, err := cl.RotateCredentialSource(ctx, ns, name, wire.RotateCredentialSource{Values: map[string]string{key: value}})
		return err
	})
}

// withdrawCredential withdraws a source.
func (c *Console) withdrawCredential(w http.ResponseWriter, r *http.Request, s *session) error {
	ns, name := r.PathValue("ns"), r.PathValue("cred")
	if c.refuses(r.Context(), s, ActionWithdrawCredential, Resource{Namespace: ns}) {
		return forbidden("withdraw credential source " + name)
	}
	return c.credentialWrite(w, r, s, credentialForm{Key: wire.CredentialValueKey}, "withdrawn", func(ctx context.Context, cl *client.Client) error {
		_, err := cl.WithdrawCredentialSource(ctx, ns, name)
		return err
	})
}

// credentialWrite runs one write and shows the page: with a notice, or
// again with the API's refusal (a 403 is the error page).
func (c *Console) credentialWrite(w http.ResponseWriter, r *http.Request, s *session, f credentialForm, notice string,
	call func(ctx context.Context, cl *client.Client) error) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := call(ctx, c.apiClient(s.token)); err != nil {
		pe, ok := apiErr(err).(*pageError)
		if ok && pe.status < 500 && pe.status != http.StatusForbidden {
			return c.showCredentials(w, r, s, pe.status, f, pe.msg, pe.code)
		}
		return apiErr(err)
	}
	http.Redirect(w, r, credentialsPath(r.PathValue("ns"))+"?notice="+notice, http.StatusSeeOther)
	return nil
}
