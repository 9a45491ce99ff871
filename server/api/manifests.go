package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

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
	writeJSON(w, http.StatusOK, apiclient.Servers{Servers: a.withStatus(r, p, out)})
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
