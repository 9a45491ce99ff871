package secrets

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Where a server's configuration holds literal credentials: a header or
// env value under a credential-like name, the user-info of a URL and a
// credential-like query or fragment parameter (in a URL and in any
// argument, header or env value), and a credential-like flag's value in
// a command's arguments (--token=..., --password ..., "Authorization:
// Bearer ..."). Values made only of ${REF}s hold none: the reference
// names a secret, it is not one. The admin API masks what these find for
// project tokens, and stderr tails are redacted of them.

// IsCredentialName reports whether a header, environment variable, query
// parameter or flag named name holds a credential.
func IsCredentialName(name string) bool { return credentialName.MatchString(name) }

// credentialName matches header, environment, query parameter and flag
// names whose values are credentials: besides the usual words, a name
// that is or ends in key, pass, pwd or sig(nature) after a separator
// (KEY, DB_PASS, X-Sig; not MONKEY).
var credentialName = regexp.MustCompile(`(?i)(auth|token|secret|passw|api[-_]?key|apikey|cookie|credential|private[-_]?key|session|(^|[-_.])(key|pass|pwd|sig|signature)$)`)

// secretRef is one ${NAME} reference without a default (a default is
// literal text, and may be a credential).
var secretRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(:-)?\}`)

// refFrame is what may surround references in a value that holds no
// credential itself: an auth scheme and separators ("Bearer ${API_KEY}",
// "${USER}:${PASS}").
var refFrame = regexp.MustCompile(`(?i)^\s*(bearer|basic|token)?[\s:;,=/-]*$`)

// OnlyRefs reports whether v is made only of references and their frame:
// "Bearer ${X}" is, "Bearer sk-live-1 ${X}" is not.
func OnlyRefs(v string) bool {
	return secretRef.MatchString(v) && refFrame.MatchString(secretRef.ReplaceAllString(v, " "))
}

// urlEnd ends a URL inside a longer text.
const urlEnd = " \t\r\n\"'<>,;"

// RewriteURLs replaces each credential of the URLs in s: the user-info's
// password (or, without one, its user, which is then the token:
// https://ghp_x@github.com) and each credential-like parameter of the
// query and the fragment,
// with f(slot, value), slot naming where it is ("0 pass", "1 ?token");
// the rest is left as written.
func RewriteURLs(s string, f func(slot, v string) string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	var b strings.Builder
	for n := 0; i >= 0; n++ {
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, urlEnd)
		if end < 0 {
			end = len(s)
		}
		slot := strconv.Itoa(n) + " "
		b.WriteString(rewriteURL(s[:end], func(where, v string) string { return f(slot+where, v) }))
		s = s[end:]
		i = strings.Index(s, "://")
	}
	b.WriteString(s)
	return b.String()
}

// rewriteURL rewrites the credentials of what follows a URL's "://".
func rewriteURL(u string, f func(slot, v string) string) string {
	auth, rest := u, ""
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		auth, rest = u[:i], u[i:]
	}
	if at := strings.LastIndex(auth, "@"); at >= 0 && !OnlyRefs(auth[:at]) {
		user, pass, ok := strings.Cut(auth[:at], ":")
		if ok {
			auth = user + ":" + f("pass", pass) + auth[at:]
		} else {
			auth = f("user", user) + auth[at:]
		}
	}
	path, query, frag := rest, "", ""
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path, frag = path[:i], path[i:]
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query = path[:i], path[i:]
	}
	return auth + path + rewriteParams(query, f) + rewriteParams(frag, f)
}

// rewriteParams rewrites the credential-like parameters of "?a=1&token=x"
// (or of a fragment, "#access_token=x").
func rewriteParams(q string, f func(slot, v string) string) string {
	if q == "" {
		return q
	}
	params := strings.Split(q[1:], "&")
	for i, p := range params {
		name, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if credentialName.MatchString(name) {
			params[i] = p[:len(p)-len(v)] + f(q[:1]+name, v)
		}
	}
	return q[:1] + strings.Join(params, "&")
}

var (
	flagValue = regexp.MustCompile(`^(-{0,2}[A-Za-z0-9._-]+)=(.*)$`) // --token=x, token=x
	flagAlone = regexp.MustCompile(`^-{1,2}[A-Za-z0-9._-]+$`)        // --password (value next)
	headerArg = regexp.MustCompile(`^([A-Za-z0-9_-]+):[ \t]*(.*)$`)  // Authorization: Bearer x
)

// RewriteArgs returns a command's arguments with each credential
// replaced by f(slot, value): the value of a credential-like flag,
// written --name=value, name=value, "Name: value" or as the argument
// after --name (unless that one starts with "-"), and the credentials of
// the URLs of every other argument (slot as RewriteURLs names it, or
// "flag").
func RewriteArgs(args []string, f func(slot, v string) string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if m := flagValue.FindStringSubmatch(a); m != nil && credentialName.MatchString(m[1]) {
			out[i] = a[:len(a)-len(m[2])] + f("flag", m[2])
			continue
		}
		if m := headerArg.FindStringSubmatch(a); m != nil && credentialName.MatchString(m[1]) {
			out[i] = a[:len(a)-len(m[2])] + f("flag", m[2])
			continue
		}
		if flagAlone.MatchString(a) && credentialName.MatchString(a) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			out[i+1] = f("flag", out[i+1])
			i++
			continue
		}
		out[i] = RewriteURLs(a, f)
	}
	return out
}

// Credentials returns the literal credentials of a server's command
// arguments and environment (see RewriteArgs; an environment value under
// a credential-like name whole, else its URLs'), for a Redactor: a
// server that prints its command line or configuration must not show
// them. References (${NAME}) are not credentials.
func Credentials(args []string, env map[string]string) []string {
	var out []string
	keep := func(_, v string) string {
		if v != "" && !OnlyRefs(v) {
			out = append(out, v)
			if u, err := url.PathUnescape(v); err == nil && u != v {
				out = append(out, u)
			}
		}
		return v
	}
	RewriteArgs(args, keep)
	for name, v := range env {
		if credentialName.MatchString(name) {
			keep("", v)
			continue
		}
		RewriteURLs(v, keep)
	}
	return out
}
