package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc describes this API; openapi_test.go holds it to Routes.
//
//go:embed openapi.json
var openAPIDoc []byte

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDoc)
	return nil
}
