package hosted

import (
	"maps"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/secrets"
)

// A container's environment, as hosted servers and the catalog's
// servers both get it: resolved from the project's secrets, and hidden
// again in whatever the container prints.

// ExpandEnv turns env (values with `${NAME}` references) and secretVars
// (variable -> secret name) into "K=V" lines, sorted by variable, from a
// project's secret values; missing lists the secrets it lacks, sorted.
func ExpandEnv(env, secretVars, vals map[string]string) (lines, missing []string) {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v, miss := config.Expand(env[k], func(n string) string { return vals[n] })
		missing = append(missing, miss...)
		lines = append(lines, k+"="+v)
	}
	for _, k := range slices.Sorted(maps.Keys(secretVars)) {
		v, ok := vals[secretVars[k]]
		if !ok {
			missing = append(missing, secretVars[k])
		}
		lines = append(lines, k+"="+v)
	}
	slices.Sort(missing)
	return lines, slices.Compact(missing)
}

// RedactEnv hides the values of env ("K=V" lines) in text, as a hosted
// server's stderr is shown: a server that prints its configuration when
// it fails must not show a secret, as is or encoded (percent, JSON,
// base64). The text is a container's stderr or log tail, or a message
// quoting one: a piece of a value cut at either edge is hidden too. The
// literal credentials of argv (the command and its arguments, see
// secrets.Credentials) are hidden as well, as its config shows them
// masked.
func RedactEnv(text string, env, argv []string) string {
	values := make([]string, 0, len(env))
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		values = append(values, v)
	}
	values = append(values, secrets.Credentials(argv, nil)...)
	var r secrets.Redactor
	r.Set(values)
	return r.RedactTail(text)
}
