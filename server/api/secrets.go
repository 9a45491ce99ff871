package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (a *API) listSecrets(w http.ResponseWriter, r *http.Request) error {
	list, err := a.st.ListSecrets(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	out := make([]apiclient.Secret, len(list))
	for i, s := range list {
		out[i] = apiclient.Secret{Name: s.Name, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, apiclient.Secrets{Secrets: out})
	return nil
}

func (a *API) putSecret(w http.ResponseWriter, r *http.Request) error {
	p, name := r.PathValue("project"), r.PathValue("name")
	if !secretName.MatchString(name) {
		return switchboard.Errorf(switchboard.ErrInvalid, "secret names are variable names: letters, digits and '_', not starting with a digit, at most 128")
	}
	var in apiclient.SecretValue
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
	writeJSON(w, http.StatusOK, apiclient.Secret{Name: s.Name, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt})
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
