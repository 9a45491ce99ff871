package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

type secretJSON struct {
	Name      string    `json:"name"`
	UpdatedAt time.Time `json:"updated_at"`
}

type tokenJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	Token     string     `json:"token"`
}

type manageData struct {
	Servers    []serverJSON
	Secrets    []secretJSON
	Tokens     []tokenJSON
	TokensNote string // why the tokens are not listed (a project token)
	SecretsErr string
	NewToken   *tokenJSON // just created: shown once, never stored
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
func (c *Console) renderManage(w http.ResponseWriter, r *http.Request, v *view, status int, newToken *tokenJSON, form map[string]string) {
	if _, ok := c.project(w, r, v); !ok {
		return
	}
	p := r.PathValue("project")
	v.Title = "Manage · " + p
	d := manageData{NewToken: newToken, Form: form}
	var servers struct {
		Servers []serverJSON `json:"servers"`
	}
	if rp := c.getJSON(r, apiProject(p)+"/servers", &servers); !rp.ok() {
		c.failed(w, r, v, rp)
		return
	}
	d.Servers = servers.Servers
	var secrets struct {
		Secrets []secretJSON `json:"secrets"`
	}
	if rp := c.getJSON(r, apiProject(p)+"/secrets", &secrets); rp.ok() {
		d.Secrets = secrets.Secrets
	} else {
		d.SecretsErr = rp.message()
	}
	var tokens struct {
		Tokens []tokenJSON `json:"tokens"`
	}
	if rp := c.getJSON(r, apiProject(p)+"/tokens", &tokens); rp.ok() {
		d.Tokens = tokens.Tokens
	} else {
		d.TokensNote = rp.message()
	}
	v.Data = d
	c.render(w, status, "manage", v)
}

// manageDo performs one Manage form's action through the API (see
// formAction).
func (c *Console) manageDo(w http.ResponseWriter, r *http.Request, p, action string) (reply, bool) {
	f := r.PostFormValue
	base := apiProject(p)
	var rp reply
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
		rp = c.call(r, http.MethodPost, base+"/servers", map[string]any{"name": f("name"), "description": f("description"),
			"enabled": f("enabled") == "on", "config": json.RawMessage(cfg)}, nil)
	case "server-update":
		in := map[string]any{"description": f("description")}
		if n := f("new_name"); n != "" && n != f("name") {
			in["name"] = n
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
				in["config"] = json.RawMessage(cfg)
			}
		}
		rp = c.call(r, http.MethodPatch, base+"/servers/"+url.PathEscape(f("name")), in, nil)
	case "server-enable", "server-disable":
		rp = c.call(r, http.MethodPatch, base+"/servers/"+url.PathEscape(f("name")), map[string]any{"enabled": action == "server-enable"}, nil)
	case "server-delete":
		rp = c.call(r, http.MethodDelete, base+"/servers/"+url.PathEscape(f("name")), nil, nil)
	case "secret-set":
		rp = c.call(r, http.MethodPut, base+"/secrets/"+url.PathEscape(f("name")), map[string]any{"value": f("value")}, nil)
	case "secret-delete":
		rp = c.call(r, http.MethodDelete, base+"/secrets/"+url.PathEscape(f("name")), nil, nil)
	case "token-create":
		rp = c.call(r, http.MethodPost, base+"/tokens", map[string]any{"name": f("name")}, nil)
		if rp.ok() {
			var t tokenJSON
			_ = json.Unmarshal(rp.body, &t)
			v := c.newView(w, r, "Manage", "manage")
			v.Flash = "Token created. Copy it now: it is shown only this once."
			c.renderManage(w, r, v, http.StatusCreated, &t, nil)
			return reply{}, true
		}
	case "token-revoke":
		rp = c.call(r, http.MethodDelete, base+"/tokens/"+url.PathEscape(f("id")), nil, nil)
	case "manifest-import":
		m := strings.TrimSpace(f("manifest"))
		if !json.Valid([]byte(m)) {
			c.manageFailed(w, r, reply{status: http.StatusBadRequest}, "The manifest is not valid JSON: it needs {\"mcp\": {\"servers\": {name: entry, ...}}}.")
			return reply{}, true
		}
		rp = c.call(r, http.MethodPut, base+"/products/"+url.PathEscape(f("product")), json.RawMessage(m), nil)
	case "project-delete":
		q := ""
		if f("force") == "on" {
			q = "?force=true"
		}
		rp = c.call(r, http.MethodDelete, base+q, nil, nil)
		if rp.ok() {
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
			return reply{}, true
		}
	case "manifest-delete":
		rp = c.call(r, http.MethodDelete, base+"/products/"+url.PathEscape(f("product")), nil, nil)
	default:
		c.renderError(w, r, nil, http.StatusNotFound, "No such action.")
		return reply{}, true
	}
	return rp, false
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
