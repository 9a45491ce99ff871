package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

type manageData struct {
	Servers    []serverView
	Secrets    []apiclient.Secret
	Tokens     []apiclient.Token
	TokensNote string // why the tokens are not listed (a project token)
	SecretsErr string
	NewToken   *apiclient.Token // just created: shown once, never stored
	Form       map[string]string
}

// done are the confirmations an action redirects to (?done=...), so the
// page never echoes free text from its URL.
var done = map[string]string{
	"server-create":   "Server added.",
	"server-update":   "Server saved.",
	"server-enable":   "Server enabled.",
	"server-disable":  "Server disabled.",
	"server-delete":   "Server deleted.",
	"secret-set":      "Secret set.",
	"secret-delete":   "Secret deleted.",
	"token-revoke":    "Token revoked.",
	"manifest-import": "Manifest imported: the product's servers are now exactly its entries.",
	"manifest-delete": "The product's servers were removed.",
}

func (c *Console) managePage(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Manage", "manage")
	v.Flash = done[r.URL.Query().Get("done")]
	c.renderManage(w, r, v, http.StatusOK, nil, nil)
}

// renderManage reads the project's servers, secrets and tokens through
// the API and renders the Manage page with status.
func (c *Console) renderManage(w http.ResponseWriter, r *http.Request, v *view, status int, newToken *apiclient.Token, form map[string]string) {
	if _, ok := c.project(w, r, v); !ok {
		return
	}
	p := r.PathValue("project")
	v.Title = "Manage · " + p
	d := manageData{NewToken: newToken, Form: form}
	api := c.api(r)
	servers, err := api.Servers(r.Context(), p)
	if err != nil {
		c.failed(w, r, v, c.fromAPI(err))
		return
	}
	d.Servers = serverViews(servers.Servers)
	if secrets, err := api.Secrets(r.Context(), p); err == nil {
		d.Secrets = secrets.Secrets
	} else {
		d.SecretsErr = c.fromAPI(err).message()
	}
	if tokens, err := api.Tokens(r.Context(), p); err == nil {
		d.Tokens = tokens.Tokens
	} else {
		d.TokensNote = c.fromAPI(err).message()
	}
	v.Data = d
	c.render(w, status, "manage", v)
}

// manageDo performs one Manage form's action through the API (see
// formAction).
func (c *Console) manageDo(w http.ResponseWriter, r *http.Request, p, action string) (reply, bool) {
	f := r.PostFormValue
	api, ctx := c.api(r), r.Context()
	var err error
	switch action {
	case "server-create":
		cfg := strings.TrimSpace(f("config"))
		if cfg == "" && strings.TrimSpace(f("url")) != "" {
			b, _ := json.Marshal(map[string]string{"url": strings.TrimSpace(f("url"))})
			cfg = string(b)
		}
		if cfg == "" {
			c.manageFailed(w, r, reply{status: http.StatusBadRequest}, "Give the server a URL or its entry as JSON.")
			return reply{}, true
		}
		if !json.Valid([]byte(cfg)) {
			c.manageFailed(w, r, reply{status: http.StatusBadRequest}, "The entry is not valid JSON: write it as in a servers file, such as {\"url\": \"https://...\"}.")
			return reply{}, true
		}
		name, desc, enabled := f("name"), f("description"), f("enabled") == "on"
		_, err = api.CreateServer(ctx, p, apiclient.ServerChange{Name: &name, Description: &desc, Enabled: &enabled, Config: json.RawMessage(cfg)})
	case "server-update":
		desc := f("description")
		in := apiclient.ServerChange{Description: &desc}
		if n := f("new_name"); n != "" && n != f("name") {
			in.Name = &n
		}
		if cfg := strings.TrimSpace(f("config")); cfg != "" {
			if !json.Valid([]byte(cfg)) {
				c.manageFailed(w, r, reply{status: http.StatusBadRequest}, "The entry is not valid JSON.")
				return reply{}, true
			}
			// Only an entry the user changed is sent: the form shows a
			// project token credentials masked, and an unchanged entry
			// also touches a stdio server's command (admin-only).
			if !sameJSON(cfg, f("config_was")) {
				in.Config = json.RawMessage(cfg)
			}
		}
		_, err = api.UpdateServer(ctx, p, f("name"), in)
	case "server-enable", "server-disable":
		enabled := action == "server-enable"
		_, err = api.UpdateServer(ctx, p, f("name"), apiclient.ServerChange{Enabled: &enabled})
	case "server-delete":
		err = api.DeleteServer(ctx, p, f("name"))
	case "secret-set":
		_, err = api.SetSecret(ctx, p, f("name"), f("value"))
	case "secret-delete":
		err = api.DeleteSecret(ctx, p, f("name"))
	case "token-create":
		var t apiclient.Token
		if t, err = api.CreateToken(ctx, p, f("name")); err == nil {
			v := c.newView(w, r, "Manage", "manage")
			v.Flash = "Token created. Copy it now: it is shown only this once."
			c.renderManage(w, r, v, http.StatusCreated, &t, nil)
			return reply{}, true
		}
	case "token-revoke":
		_, err = api.RevokeToken(ctx, p, f("id"))
	case "manifest-import":
		m := strings.TrimSpace(f("manifest"))
		if !json.Valid([]byte(m)) {
			c.manageFailed(w, r, reply{status: http.StatusBadRequest}, "The manifest is not valid JSON: it needs {\"mcp\": {\"servers\": {name: entry, ...}}}.")
			return reply{}, true
		}
		_, err = api.PutProduct(ctx, p, f("product"), json.RawMessage(m))
	case "project-delete":
		if err = api.DeleteProject(ctx, p, f("force") == "on"); err == nil {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return reply{}, true
		}
	case "manifest-delete":
		err = api.DeleteProduct(ctx, p, f("product"))
	default:
		c.renderError(w, r, nil, http.StatusNotFound, "No such action.")
		return reply{}, true
	}
	return c.fromAPI(err), false
}

// manageFailed shows the Manage page again with msg and rp's status (a
// 401 goes to the login form), the create forms filled with what was
// sent (never a secret value).
func (c *Console) manageFailed(w http.ResponseWriter, r *http.Request, rp reply, msg string) {
	if rp.status == http.StatusUnauthorized {
		c.failed(w, r, nil, rp)
		return
	}
	form := map[string]string{"action": r.PathValue("action")}
	for _, k := range []string{"name", "description", "config", "url", "product", "manifest"} {
		form[k] = r.PostFormValue(k)
	}
	v := c.newView(w, r, "Manage", "manage")
	v.Error = msg
	c.renderManage(w, r, v, rp.status, nil, form)
}

// formAction runs one form posted to a project page: do performs action
// through the API and returns its reply, or handled when it has answered
// itself (a form refused before asking the API, a token shown once, an
// unknown action). Success redirects back to the page (303, with done=
// action); a refusal shows the page again through failed, with the API's
// status and message.
func (c *Console) formAction(page string, do func(w http.ResponseWriter, r *http.Request, p, action string) (reply, bool),
	failed func(w http.ResponseWriter, r *http.Request, rp reply, msg string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, cancel := withTimeout(r, pageTimeout)
		defer cancel()
		p := r.PathValue("project")
		if !projectID(p) {
			c.renderError(w, r, nil, http.StatusNotFound, "Project not found.")
			return
		}
		action := r.PathValue("action")
		rp, handled := do(w, r, p, action)
		if handled {
			return
		}
		if !rp.ok() {
			failed(w, r, rp, rp.message())
			return
		}
		http.Redirect(w, r, "/ui/p/"+p+"/"+page+"?done="+action, http.StatusSeeOther)
	}
}

// sameJSON reports whether a and b are the same JSON text but for
// whitespace (a browser sends a textarea's line breaks as CRLF).
func sameJSON(a, b string) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, []byte(a)) == nil && json.Compact(&cb, []byte(b)) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
