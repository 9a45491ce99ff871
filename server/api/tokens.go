package api

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func toToken(t switchboard.Token) apiclient.Token {
	return apiclient.Token{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, RevokedAt: timeOrNil(t.RevokedAt)}
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowTokens(r, r.PathValue("project")); err != nil {
		return err
	}
	list, err := a.st.ListTokens(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	out := make([]apiclient.Token, len(list))
	for i, t := range list {
		out[i] = toToken(t)
	}
	writeJSON(w, http.StatusOK, apiclient.Tokens{Tokens: out})
	return nil
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowTokens(r, r.PathValue("project")); err != nil {
		return err
	}
	p := r.PathValue("project")
	var in apiclient.NewToken
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
