package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/registrytest"
)

// TestOnDemandPullsFromRegistry: a catalog server whose image is only in
// a private registry is pulled on mcp-add with the calling project's
// registry credentials and then serves its tools; a project without them
// is refused by the registry, naming the server; an entry outside the
// allow-list is dropped at load with a warning naming the rule.
func TestOnDemandPullsFromRegistry(t *testing.T) {
	eng := enginetest.New(t)
	reg := registrytest.Start(t, "carol", "cat-pw-3")
	ctx := context.Background()
	// Content of its own: the registry's only (GoImage's is on the
	// engine under its own name, which any project may name).
	ref := reg.Addr + "/catalog/fixture:v1"
	enginetest.GoImageCopy(t, eng, fixturePkg, ref)
	if err := eng.PushImage(ctx, ref, &engine.RegistryAuth{Username: "carol", Password: "cat-pw-3"}); err != nil {
		t.Fatal(err)
	}
	if err := eng.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(`
registry:
  pulled: {image: %q, longLived: true, disableNetwork: true, registryAuth: {username: "${REG_USER}", password: "${REG_PASS}"}}
  elsewhere: {image: "ghcr.io/other/x:1", disableNetwork: true}
`, ref)))
	if err != nil {
		t.Fatal(err)
	}
	eng.SetImageRules(engine.ImageRules{Allow: []string{reg.Addr + "/"}})
	defer eng.SetImageRules(engine.ImageRules{})
	cat.Refuse(eng.CheckImage)
	if cat.Entry("elsewhere") != nil || !slices.ContainsFunc(cat.Warnings, func(w string) bool {
		return strings.Contains(w, `"elsewhere" refused`) && strings.Contains(w, "MCP_SERVER_IMAGE_ALLOW")
	}) {
		t.Errorf("an entry outside the allow-list: entries %d, warnings %q", len(cat.Entries), cat.Warnings)
	}
	secrets := map[string]map[string]string{"p": {"REG_USER": "carol", "REG_PASS": "cat-pw-3"}, "q": {}}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{
		Engine: eng, Catalog: cat, Version: "test",
		Secrets: func(_ context.Context, p string) (map[string]string, error) { return secrets[p], nil },
	})
	t.Cleanup(func() { _ = o.Close(context.Background()) })

	if _, err := o.Add(ctx, "q", "s1", "pulled", nil); err == nil || !strings.Contains(err.Error(), "REG_USER") {
		t.Errorf("a project without the secrets: %v; want the missing secret named", err)
	}
	// mcp-add with a progress token hears how the pull goes.
	var notes []map[string]any
	raw, err := o.ProjectTools("p").CallTool(ctx, switchboard.CallRequest{Project: "p", Session: "s1", Tool: catalog.ToolAdd,
		Arguments: json.RawMessage(`{"name":"pulled"}`), Meta: json.RawMessage(`{"progressToken":"t1"}`),
		OnProgress: func(b json.RawMessage) {
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			notes = append(notes, m)
		}})
	if err != nil {
		t.Fatalf("mcp-add of a server from the private registry: %v", err)
	}
	if !strings.Contains(string(raw), `"echo"`) {
		t.Fatalf("mcp-add = %s, want its tools", raw)
	}
	if len(notes) == 0 {
		t.Fatal("mcp-add that waited for a pull sent no progress notification")
	}
	for i, m := range notes {
		if m["progressToken"] != "t1" || m["progress"] != float64(i+1) || !strings.Contains(fmt.Sprint(m["message"]), "pulling image "+ref) {
			t.Errorf("progress notification %d: %v", i, m)
		}
	}
	if got := callText(t, o.SessionTools("p"), "s1", "echo", `{"text":"from the registry"}`); !strings.Contains(got, "from the registry") {
		t.Errorf("echo = %q", got)
	}
	// Another project that names wrong credentials is refused, though
	// the image is on the engine now.
	secrets["q"] = map[string]string{"REG_USER": "carol", "REG_PASS": "nope"}
	_, err = o.Add(ctx, "q", "s2", "pulled", nil)
	if !errors.Is(err, switchboard.ErrForbidden) || !strings.Contains(err.Error(), `"pulled"`) || strings.Contains(err.Error(), "cat-pw-3") || strings.Contains(err.Error(), "nope") {
		t.Errorf("another project with wrong credentials: %v; want ErrForbidden naming the server, without passwords", err)
	}
}
