package main

import "runtime/debug"

// version is set at build time with -ldflags "-X main.version=..."; when
// it is not, buildVersion reads what the Go toolchain recorded.
var version = "dev"

func init() { version = buildVersion(version, debug.ReadBuildInfo) }

// buildVersion is set unless it is "dev": then the module's version
// (`go install github.com/...@v1.2.3`), else the commit a build from a
// clone was made at ("devel+<12 hex>", "-dirty" with uncommitted
// changes), else "dev".
func buildVersion(set string, read func() (*debug.BuildInfo, bool)) string {
	if set != "dev" {
		return set
	}
	bi, ok := read()
	if !ok {
		return set
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) < 12 {
		return set
	}
	v := "devel+" + rev[:12]
	if dirty {
		v += "-dirty"
	}
	return v
}
