package api

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// ---- projects

type projectJSON struct {
	ID          string    `json:"id"`
	Description string    `json:"description"`
	MCPURL      string    `json:"mcp_url"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Closed marks, in dev mode, a project its first token closed: listed
	// so it does not vanish, but the rest of it needs that token.
	Closed bool `json:"closed,omitempty"`
}

func toProject(p switchboard.Project) projectJSON {
	u := "/projects/" + p.ID + "/mcp"
	if p.ID == "default" {
		u = "/mcp"
	}
	return projectJSON{ID: p.ID, Description: p.Description, MCPURL: u, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func (a *API) listProjects(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "listing projects"); err != nil {
		return err
	}
	list, err := a.st.ListProjects(r.Context())
	if err != nil {
		return err
	}
	out := make([]projectJSON, 0, len(list))
	for _, p := range list {
		// In dev mode, a project closed by its tokens is listed by name
		// only, marked closed: its description and the rest need its token.
		if a.opts.Access.AllowProject(r, p.ID) == nil {
			out = append(out, toProject(p))
			continue
		}
		c := toProject(switchboard.Project{ID: p.ID})
		c.Closed = true
		out = append(out, c)
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": out})
	return nil
}

func (a *API) createProject(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "creating a project"); err != nil {
		return err
	}
	var in struct {
		ID          string `json:"id"`
		Description string `json:"description"`
	}
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if !projectID.MatchString(in.ID) {
		return switchboard.Errorf(switchboard.ErrInvalid, "id must be 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit")
	}
	if err := text("description", in.Description); err != nil {
		return err
	}
	p, err := a.st.CreateProject(r.Context(), switchboard.Project{ID: in.ID, Description: in.Description})
	if err != nil {
		return err
	}
	a.reconcile(r.Context(), p.ID)
	a.log.Info("project created", "project", p.ID)
	writeJSON(w, http.StatusCreated, toProject(p))
	return nil
}

func (a *API) getProject(w http.ResponseWriter, r *http.Request) error {
	p, err := a.st.GetProject(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProject(p))
	return nil
}

func (a *API) updateProject(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Description *string `json:"description"`
	}
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	p, err := a.st.GetProject(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	if in.Description != nil {
		if err := text("description", *in.Description); err != nil {
			return err
		}
		p.Description = *in.Description
	}
	if p, err = a.st.UpdateProject(r.Context(), p); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProject(p))
	return nil
}

func (a *API) deleteProject(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "deleting a project"); err != nil {
		return err
	}
	id := r.PathValue("project")
	if id == "default" {
		return switchboard.Errorf(switchboard.ErrConflict, "the default project cannot be deleted; delete its servers instead")
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	if _, err := a.st.GetProject(r.Context(), id); err != nil {
		return err
	}
	if a.opts.Teardown != nil && !force {
		usage, err := a.opts.Teardown.ProjectUsage(r.Context(), id)
		if err != nil {
			return err
		}
		if len(usage) > 0 {
			return switchboard.Errorf(switchboard.ErrConflict, "project %q still has %s; deleting it removes them and their files for good: repeat with ?force=true (CLI: switchboard projects rm --force %s)", id, strings.Join(usage, ", "), id)
		}
	}
	if err := a.st.DeleteProject(r.Context(), id); err != nil {
		return err
	}
	a.reconcile(r.Context(), id)
	a.opts.TokensChanged(id)
	if a.opts.Teardown != nil {
		// The rows are gone and the project's endpoint is closed: nothing
		// can start anew for it. A failure here leaves objects a retry
		// of the same DELETE (404 now) cannot reach, so say so loudly.
		if err := a.opts.Teardown.DeleteProject(context.WithoutCancel(r.Context()), id); err != nil {
			a.log.Error("project deleted, but some of its containers or volumes could not be removed", "project", id, "err", err)
			return switchboard.Errorf(switchboard.ErrInternal, "project %q was deleted, but some of its containers or volumes could not be removed; the gateway's log names them", id)
		}
	}
	a.log.Info("project deleted", "project", id, "forced", force)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// boolParam reads an optional true/false query parameter. Errors:
// ErrInvalid.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	switch v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, switchboard.Errorf(switchboard.ErrInvalid, "query parameter %s must be true or false", name)
}

// ---- servers

type serverJSON struct {
	ID          string                    `json:"id"`
	ProjectID   string                    `json:"project_id"`
	ProductID   string                    `json:"product_id,omitempty"`
	Name        string                    `json:"name"`
	Description string                    `json:"description"`
	Transport   switchboard.Transport     `json:"transport"`
	Config      json.RawMessage           `json:"config"`
	Enabled     bool                      `json:"enabled"`
	CreatedAt   time.Time                 `json:"created_at"`
	UpdatedAt   time.Time                 `json:"updated_at"`
	Status      *switchboard.ServerStatus `json:"status,omitempty"`
	// Source says where the server comes from: "api" (a stored row this
	// API manages), "file" (the servers file), "built-in" (the demo or the
	// gateway's own tools) or "hosted" (a container the hosted API
	// manages). Only "api" rows can be changed here (ReadOnly otherwise).
	Source   string `json:"source"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// withStatus renders records with the live status of the enabled ones.
func (a *API) withStatus(r *http.Request, project string, recs []switchboard.ServerRecord) []serverJSON {
	byName := map[string]switchboard.ServerStatus{}
	if st, err := a.opts.Projects.Status(r.Context(), project); err == nil {
		for _, s := range st {
			byName[s.Name] = s
		}
	}
	admin := a.opts.Access.AllowAdmin(r, "") == nil
	out := make([]serverJSON, len(recs))
	for i, rec := range recs {
		cfg := rec.Config
		if !admin {
			cfg = maskConfig(cfg)
		}
		out[i] = serverJSON{ID: rec.ID, ProjectID: rec.ProjectID, ProductID: rec.ProductID, Name: rec.Name, Source: "api",
			Description: rec.Description, Transport: rec.Transport, Config: cfg, Enabled: rec.Enabled,
			CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}
		if s, ok := byName[rec.Name]; ok && rec.Enabled {
			out[i].Status = &s
		}
	}
	return out
}

func (a *API) listServers(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	recs, err := a.st.ListServers(r.Context(), p)
	if err != nil {
		return err
	}
	out := a.withStatus(r, p, recs)
	// Then every server the project serves that the store does not hold:
	// the servers file (or the built-in demo), the gateway's own tools and
	// hosted containers, read-only here, in the order status lists them.
	stored := map[string]bool{}
	for _, rec := range recs {
		stored[rec.Name] = true
	}
	if st, err := a.opts.Projects.Status(r.Context(), p); err == nil {
		for _, s := range st {
			if stored[s.Name] {
				continue
			}
			src := "built-in"
			switch {
			case s.Transport == switchboard.TransportHosted:
				src = "hosted"
			case a.opts.Projects.FileServer(p, s.Name) && a.opts.Reload != nil:
				src = "file"
			}
			s := s
			out = append(out, serverJSON{ProjectID: p, Name: s.Name, Transport: s.Transport, Enabled: true, Source: src, ReadOnly: true, Status: &s})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": out})
	return nil
}

type serverIn struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Enabled     *bool           `json:"enabled"`
	Config      json.RawMessage `json:"config"`
}

func (a *API) createServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	var in serverIn
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if in.Name == nil || *in.Name == "" {
		return switchboard.Errorf(switchboard.ErrInvalid, "name is required")
	}
	if in.Config == nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "config is required: the server's entry as in an mcpServers file, such as {\"command\": \"npx\", \"args\": [...]} or {\"url\": \"https://...\"}")
	}
	rec := switchboard.ServerRecord{ProjectID: p, Name: *in.Name, Config: in.Config, Enabled: true}
	if in.Description != nil {
		rec.Description = *in.Description
	}
	if in.Enabled != nil {
		rec.Enabled = *in.Enabled
	}
	if err := text("description", rec.Description); err != nil {
		return err
	}
	if err := a.admit(r, &rec, true); err != nil {
		return err
	}
	rec, err := a.st.CreateServer(r.Context(), rec)
	if err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("server created", "project", p, "server", rec.Name, "transport", rec.Transport)
	writeJSON(w, http.StatusCreated, a.withStatus(r, p, []switchboard.ServerRecord{rec})[0])
	return nil
}

// pathServer is the {name} of a server route. A name no server can have
// is not found without asking the store (or echoing it).
func pathServer(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !serverName.MatchString(name) {
		return "", switchboard.Errorf(switchboard.ErrNotFound, "server not found (server names are 1-64 letters, digits, '_', '-' or '.')")
	}
	return name, nil
}

func (a *API) getServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	name, err := pathServer(r)
	if err != nil {
		return err
	}
	rec, err := a.st.GetServer(r.Context(), p, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.withStatus(r, p, []switchboard.ServerRecord{rec})[0])
	return nil
}

func (a *API) updateServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	var in serverIn
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	name, err := pathServer(r)
	if err != nil {
		return err
	}
	rec, err := a.st.GetServer(r.Context(), p, name)
	if err != nil {
		return err
	}
	// The stored kind decides, as for DELETE: any change to a stdio
	// server is an admin action, whatever the new entry says. Turning it
	// into a remote server would otherwise let a project token stop the
	// admin's command and then delete what is left.
	if err := a.stdioAllowed(r, rec.Transport); err != nil {
		return err
	}
	if in.Name != nil {
		rec.Name = *in.Name
	}
	if in.Description != nil {
		if err := text("description", *in.Description); err != nil {
			return err
		}
		rec.Description = *in.Description
	}
	if in.Enabled != nil {
		rec.Enabled = *in.Enabled
	}
	if in.Config != nil {
		if a.opts.Access.AllowAdmin(r, "") != nil {
			in.Config = keepMasked(rec.Config, in.Config)
		}
		rec.Config = in.Config
	}
	// Enabling counts too: an admin may have disabled a command on purpose.
	if err := a.admit(r, &rec, in.Config != nil || in.Name != nil || in.Enabled != nil); err != nil {
		return err
	}
	if rec, err = a.st.UpdateServer(r.Context(), rec); err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("server updated", "project", p, "server", rec.Name, "enabled", rec.Enabled)
	writeJSON(w, http.StatusOK, a.withStatus(r, p, []switchboard.ServerRecord{rec})[0])
	return nil
}

func (a *API) deleteServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	name, err := pathServer(r)
	if err != nil {
		return err
	}
	// Removing a stdio server changes what runs on the host (and frees
	// the secrets it referenced for a project token to set): admin's.
	rec, err := a.st.GetServer(r.Context(), p, name)
	if err != nil {
		return err
	}
	if err := a.stdioAllowed(r, rec.Transport); err != nil {
		return err
	}
	if err := a.st.DeleteServer(r.Context(), p, name); err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("server deleted", "project", p, "server", name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ---- product manifests

func (a *API) importManifest(w http.ResponseWriter, r *http.Request) error {
	p, product := r.PathValue("project"), r.PathValue("product")
	if !productID.MatchString(product) {
		return switchboard.Errorf(switchboard.ErrInvalid, "product must be 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit")
	}
	var in struct {
		MCP *struct {
			Servers json.RawMessage `json:"servers"`
		} `json:"mcp"`
	}
	if err := a.decode(w, r, &in, true); err != nil {
		return err
	}
	if in.MCP == nil || in.MCP.Servers == nil || string(in.MCP.Servers) == "null" {
		return switchboard.Errorf(switchboard.ErrInvalid, "the manifest needs an \"mcp\": {\"servers\": {name: entry, ...}} block")
	}
	names, entries, err := members(in.MCP.Servers)
	if err != nil {
		return err
	}
	recs := make([]switchboard.ServerRecord, 0, len(names))
	for i, name := range names {
		entry := entries[i]
		tr, err := a.parseEntry(name, entry)
		if err != nil {
			return err
		}
		if err := a.stdioAllowed(r, tr); err != nil {
			return err
		}
		var meta struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(entry, &meta)
		if err := text("server "+strconv.Quote(name)+" description", meta.Description); err != nil {
			return err
		}
		recs = append(recs, switchboard.ServerRecord{Name: name, Description: meta.Description, Transport: tr, Config: entry, Enabled: true})
	}
	for _, rec := range recs {
		if err := a.notReserved(p, rec.Name); err != nil {
			return err
		}
	}
	if a.opts.Access.AllowAdmin(r, "") != nil {
		// A project token read the product's credentials masked: a
		// manifest it sends back keeps the stored values, as a PATCH does.
		stored, err := a.st.ListServers(r.Context(), p)
		if err != nil {
			return err
		}
		byName := map[string]json.RawMessage{}
		for _, s := range stored {
			if s.ProductID == product {
				byName[s.Name] = s.Config
			}
		}
		for i := range recs {
			if old, ok := byName[recs[i].Name]; ok {
				recs[i].Config = keepMasked(old, recs[i].Config)
			}
		}
	}
	if err := a.productStdioAllowed(r, p, product, recs); err != nil {
		return err
	}
	out, err := a.st.ImportManifest(r.Context(), p, product, recs)
	if err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("manifest imported", "project", p, "product", product, "servers", len(out))
	writeJSON(w, http.StatusOK, map[string]any{"servers": a.withStatus(r, p, out)})
	return nil
}

// members decodes the manifest's servers object in order, so the first bad
// entry is the one reported, and refuses a name given twice (decoding into
// a map would silently keep the last, which the servers file refuses too).
func members(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	notObject := switchboard.Errorf(switchboard.ErrInvalid, "\"mcp\".\"servers\" must be an object of server name -> entry")
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, notObject
	}
	var names []string
	var entries []json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil, nil, notObject
		}
		var entry json.RawMessage
		if err := dec.Decode(&entry); err != nil {
			return nil, nil, notObject
		}
		if seen[name] {
			return nil, nil, switchboard.Errorf(switchboard.ErrInvalid, "the manifest lists server %q twice", switchboard.Clip(name))
		}
		seen[name] = true
		names, entries = append(names, name), append(entries, entry)
	}
	return names, entries, nil
}

func (a *API) deleteProduct(w http.ResponseWriter, r *http.Request) error {
	p, product := r.PathValue("project"), r.PathValue("product")
	if !productID.MatchString(product) {
		return switchboard.Errorf(switchboard.ErrInvalid, "product must be 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit")
	}
	if err := a.productStdioAllowed(r, p, product, nil); err != nil {
		return err
	}
	if _, err := a.st.ImportManifest(r.Context(), p, product, nil); err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// productStdioAllowed: importing next as product's servers removes or
// replaces the product's stdio servers that next does not keep exactly
// as they are; like deleting one by hand, that is the admin's.
func (a *API) productStdioAllowed(r *http.Request, project, product string, next []switchboard.ServerRecord) error {
	recs, err := a.st.ListServers(r.Context(), project)
	if err != nil {
		return err
	}
	keep := map[string]json.RawMessage{}
	for _, n := range next {
		keep[n.Name] = n.Config
	}
	for _, rec := range recs {
		if rec.ProductID != product || rec.Transport != switchboard.TransportStdio {
			continue
		}
		if cfg, ok := keep[rec.Name]; ok && bytes.Equal(compactJSON(cfg), compactJSON(rec.Config)) {
			continue
		}
		if err := a.opts.Access.AllowCommands(r); err != nil {
			return switchboard.Errorf(switchboard.ErrForbidden, "product %q holds stdio server %q, which runs a command on the gateway host; replacing or removing it needs the admin token", product, rec.Name)
		}
	}
	return nil
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// ---- secrets (write-only)

type secretJSON struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (a *API) listSecrets(w http.ResponseWriter, r *http.Request) error {
	list, err := a.st.ListSecrets(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	out := make([]secretJSON, len(list))
	for i, s := range list {
		out[i] = secretJSON{Name: s.Name, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"secrets": out})
	return nil
}

func (a *API) putSecret(w http.ResponseWriter, r *http.Request) error {
	p, name := r.PathValue("project"), r.PathValue("name")
	if !secretName.MatchString(name) {
		return switchboard.Errorf(switchboard.ErrInvalid, "secret names are variable names: letters, digits and '_', not starting with a digit, at most 128")
	}
	var in struct {
		Value *string `json:"value"`
	}
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if err := a.secretOfCommand(r, p, name); err != nil {
		return err
	}
	switch {
	case in.Value == nil || *in.Value == "":
		return switchboard.Errorf(switchboard.ErrInvalid, "value is required and must not be empty")
	case len(*in.Value) > maxSecretBytes:
		return switchboard.Errorf(switchboard.ErrInvalid, "value must be at most %d bytes", maxSecretBytes)
	case containsNUL(*in.Value):
		return switchboard.Errorf(switchboard.ErrInvalid, "value must not contain NUL characters (environment variables cannot hold them)")
	}
	ct, err := a.opts.Secrets.Seal(p, name, []byte(*in.Value))
	if err != nil {
		return err
	}
	s, err := a.st.PutSecret(r.Context(), switchboard.Secret{ProjectID: p, Name: name, Ciphertext: ct})
	if err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("secret set", "project", p, "secret", name)
	writeJSON(w, http.StatusOK, secretJSON{Name: s.Name, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt})
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func (a *API) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	p, name := r.PathValue("project"), r.PathValue("name")
	if !secretName.MatchString(name) {
		return switchboard.Errorf(switchboard.ErrNotFound, "secret not found (secret names are letters, digits and '_', not starting with a digit, at most 128)")
	}
	if err := a.secretOfCommand(r, p, name); err != nil {
		return err
	}
	if err := a.st.DeleteSecret(r.Context(), p, name); err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("secret deleted", "project", p, "secret", name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ---- tokens (admin)

type tokenJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Token     string     `json:"token,omitempty"` // only in the creation response
}

func toToken(t switchboard.Token) tokenJSON {
	return tokenJSON{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, RevokedAt: timeOrNil(t.RevokedAt)}
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowTokens(r, r.PathValue("project")); err != nil {
		return err
	}
	list, err := a.st.ListTokens(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	out := make([]tokenJSON, len(list))
	for i, t := range list {
		out[i] = toToken(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
	return nil
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowTokens(r, r.PathValue("project")); err != nil {
		return err
	}
	p := r.PathValue("project")
	var in struct {
		Name string `json:"name"`
	}
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if err := text("name", in.Name); err != nil {
		return err
	}
	tok, hash := a.opts.NewToken()
	t, err := a.st.CreateToken(r.Context(), switchboard.Token{ProjectID: p, Name: in.Name, Hash: hash})
	if err != nil {
		return err
	}
	a.opts.TokensChanged(p)
	a.log.Info("token created", "project", p, "token_id", t.ID, "name", t.Name)
	out := toToken(t)
	out.Token = tok
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowTokens(r, r.PathValue("project")); err != nil {
		return err
	}
	p := r.PathValue("project")
	t, err := a.st.RevokeToken(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	a.opts.TokensChanged(p)
	a.log.Info("token revoked", "project", p, "token_id", t.ID)
	writeJSON(w, http.StatusOK, toToken(t))
	return nil
}

// ---- tools, status, history

// toolCallParams are the query parameters of GET tool-calls.
var toolCallParams = []string{"server", "tool", "outcome", "since", "until", "limit", "cursor"}

// toolCallQuery parses the query of GET tool-calls strictly: a malformed
// query, an unknown parameter (a typo such as "limt" would otherwise give a
// default page silently) or a parameter given twice is ErrInvalid.
func toolCallQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "the query string is malformed: separate parameters with '&' and percent-encode values")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(toolCallParams, k):
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "unknown query parameter %q; use %s", switchboard.Clip(k), strings.Join(toolCallParams, ", "))
		case len(q[k]) > 1:
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "query parameter %q is given more than once", k)
		}
	}
	return q, nil
}

func (a *API) listTools(w http.ResponseWriter, r *http.Request) error {
	cat, err := a.opts.Projects.Tools(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	type toolJSON struct {
		Name   string          `json:"name"`
		Server string          `json:"server"`
		Tool   json.RawMessage `json:"tool"`
	}
	out := make([]toolJSON, len(cat.Tools))
	for i, t := range cat.Tools {
		out[i] = toolJSON{Name: t.Name, Server: t.Server, Tool: t.Raw}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": out})
	return nil
}

func (a *API) status(w http.ResponseWriter, r *http.Request) error {
	st, err := a.opts.Projects.Status(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	if st == nil {
		st = []switchboard.ServerStatus{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": st})
	return nil
}

func (a *API) listToolCalls(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	if _, err := a.st.GetProject(r.Context(), p); err != nil {
		return err
	}
	q, err := toolCallQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	f := switchboard.ToolCallFilter{ProjectID: p, Server: q.Get("server"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Cursor: q.Get("cursor")}
	switch f.Outcome {
	case "", switchboard.OutcomeOK, switchboard.OutcomeToolError, switchboard.OutcomeError:
	default:
		return switchboard.Errorf(switchboard.ErrInvalid, "outcome must be ok, tool_error or error")
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return switchboard.Errorf(switchboard.ErrInvalid, "%s must be an RFC 3339 time such as 2026-11-22T10:00:00Z", t.name)
			}
			*t.dst = ts
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > switchboard.MaxToolCallLimit {
			return switchboard.Errorf(switchboard.ErrInvalid, "limit must be an integer from 1 to %d", switchboard.MaxToolCallLimit)
		}
		f.Limit = n
	}
	for _, v := range []string{f.Server, f.Tool, f.Cursor} {
		if err := text("a filter", v); err != nil {
			return err
		}
	}
	page, err := a.st.ListToolCalls(r.Context(), f)
	if err != nil {
		return err
	}
	type callJSON struct {
		ID         int64           `json:"id"`
		Session    string          `json:"session"`
		Server     string          `json:"server"`
		Tool       string          `json:"tool"`
		Arguments  json.RawMessage `json:"arguments"`
		Outcome    string          `json:"outcome"`
		Code       int             `json:"code,omitempty"`
		DurationMS float64         `json:"duration_ms"`
		StartedAt  time.Time       `json:"started_at"`
	}
	out := make([]callJSON, len(page.Calls))
	for i, c := range page.Calls {
		out[i] = callJSON{ID: c.ID, Session: c.Session, Server: c.Server, Tool: c.Tool, Arguments: c.Arguments,
			Outcome: c.Outcome, Code: c.Code, DurationMS: float64(c.Duration.Microseconds()) / 1000, StartedAt: c.StartedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": out, "next": page.Next})
	return nil
}

// admit checks a server row before it is written: its entry parses (which
// sets rec.Transport), the sender may configure a stdio server when the
// write touches what runs (touchesCommand), and no servers-file server
// already has its name.
func (a *API) admit(r *http.Request, rec *switchboard.ServerRecord, touchesCommand bool) error {
	tr, err := a.parseEntry(rec.Name, rec.Config)
	if err != nil {
		return err
	}
	if touchesCommand {
		if err := a.stdioAllowed(r, tr); err != nil {
			return err
		}
	}
	rec.Transport = tr
	return a.notReserved(rec.ProjectID, rec.Name)
}

// notReserved refuses a stored server named like one the gateway's servers
// file (or the built-in demo) configures: the file's server would win and
// the stored one would never run.
func (a *API) notReserved(project, name string) error {
	if a.opts.Projects.FileServer(project, name) {
		return switchboard.Errorf(switchboard.ErrConflict, "server %q is configured by the gateway's servers file (MCP_SERVER_CONFIG) or built-in demo in project %q; choose another name", name, project)
	}
	return nil
}

// secretOfCommand: a secret that a stdio server or a hosted server of the
// project references is part of what the gateway runs on its host
// (`${ROOT}` in a command's args, `${TOKEN}` in a container's
// environment), so setting or deleting it is an admin action like editing
// that server: otherwise a project token could free it and set its own
// value for the next child or container.
func (a *API) secretOfCommand(r *http.Request, project, name string) error {
	recs, err := a.st.ListServers(r.Context(), project)
	if err != nil {
		return err
	}
	ref := regexp.MustCompile(`\$\{` + regexp.QuoteMeta(name) + `(:-[^}]*)?\}`)
	for _, rec := range recs {
		if rec.Transport == switchboard.TransportStdio && ref.Match(rec.Config) {
			if err := a.opts.Access.AllowCommands(r); err != nil {
				return switchboard.Errorf(switchboard.ErrForbidden, "secret %q is used by stdio server %q, which runs a command on the gateway host; changing it needs the admin token", name, rec.Name)
			}
		}
	}
	hosted, err := a.st.ListWorkspaces(r.Context(), switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerMCPServer})
	if err != nil {
		return err
	}
	for _, w := range hosted {
		// secret_refs lists the references of values the row stores
		// sealed ("Bearer ${TOKEN}"), which the text no longer shows
		// (hosted's storedRegistration).
		var reg struct {
			Name       string   `json:"name"`
			SecretRefs []string `json:"secret_refs"`
		}
		_ = json.Unmarshal(w.Config, &reg)
		if ref.Match(w.Config) || slices.Contains(reg.SecretRefs, name) {
			if err := a.hostAllowed(r); err != nil {
				return switchboard.Errorf(switchboard.ErrForbidden, "secret %q is used by hosted server %q, which runs a container on the gateway host; changing it needs the admin token", name, reg.Name)
			}
		}
	}
	return nil
}

// reload re-reads the servers file, as SIGHUP does, without the risk of
// signalling the wrong process (the pid of `go run` is not the gateway's).
// Admin only: the file decides what runs on the host.
func (a *API) reload(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "reloading the servers file"); err != nil {
		return err
	}
	if a.opts.Reload == nil {
		return switchboard.Errorf(switchboard.ErrUnavailable, "this gateway has no servers file to reload")
	}
	n, err := a.opts.Reload(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"reloaded": true, "servers": n})
	return nil
}
