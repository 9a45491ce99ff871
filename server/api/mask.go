package api

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What a project token reads of a server entry. The admin reads entries
// as stored; everyone else reads every literal credential masked, wherever
// the entry holds it: a header or env value under a credential-like name,
// the user-info of a URL and a credential-like query or fragment parameter
// (in "url" and in any args, header or env value), and a credential-like
// flag's value in args (--token=..., --password ..., "Authorization:
// Bearer ..."). Values made only of ${REF}s are shown as written: the
// reference names no secret.

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

// onlyRefs reports whether v is made only of references and their frame:
// "Bearer ${X}" is, "Bearer sk-live-1 ${X}" is not.
func onlyRefs(v string) bool {
	return secretRef.MatchString(v) && refFrame.MatchString(secretRef.ReplaceAllString(v, " "))
}

// masked is the value a project token reads in place of a literal
// credential.
const masked = "[redacted]"

// maskSecret is v, or masked when v is a literal credential.
func maskSecret(v string) string {
	if v == "" || onlyRefs(v) {
		return v
	}
	return masked
}

// maskValue masks a header or env value: whole under a credential-like
// name, else the credentials of the URLs in it.
func maskValue(name, v string) string {
	if credentialName.MatchString(name) {
		return maskSecret(v)
	}
	return maskURLs(v)
}

// urlEnd ends a URL inside a longer text.
const urlEnd = " \t\r\n\"'<>,;"

// maskURLs masks the credentials of every URL ("scheme://...") in s: the
// user-info's password (or, without one, its user, which is then the
// token: https://ghp_x@github.com) and each credential-like parameter of
// the query and the fragment. The rest is left as written.
func maskURLs(s string) string {
	return rewriteURLs(s, func(_, v string) string { return maskSecret(v) })
}

// rewriteURLs replaces each credential of the URLs in s (see maskURLs)
// with f(slot, value), slot naming where it is ("0 pass", "1 ?token").
func rewriteURLs(s string, f func(slot, v string) string) string {
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
	if at := strings.LastIndex(auth, "@"); at >= 0 && !onlyRefs(auth[:at]) {
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

// keepURL returns now, a URL a project token sent, with each credential
// that reads "[redacted]" where stored held a masked one put back: a
// token that changes a URL's path keeps the admin's password and api_key.
func keepURL(stored, now string) string {
	was := map[string]string{}
	rewriteURLs(stored, func(slot, v string) string {
		was[slot] = v
		return v
	})
	return rewriteURLs(now, func(slot, v string) string {
		if prev, ok := was[slot]; ok && v == masked && maskSecret(prev) == masked {
			return prev
		}
		return v
	})
}

var (
	flagValue = regexp.MustCompile(`^(-{0,2}[A-Za-z0-9._-]+)=(.*)$`) // --token=x, token=x
	flagAlone = regexp.MustCompile(`^-{1,2}[A-Za-z0-9._-]+$`)        // --password (value next)
	headerArg = regexp.MustCompile(`^([A-Za-z0-9_-]+):[ \t]*(.*)$`)  // Authorization: Bearer x
)

// maskArgs masks a command's arguments: the value of a credential-like
// flag, written --name=value, name=value, "Name: value" or as the
// argument after --name (unless that one starts with "-"), and the URLs
// of every other argument.
func maskArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if m := flagValue.FindStringSubmatch(a); m != nil && credentialName.MatchString(m[1]) {
			out[i] = a[:len(a)-len(m[2])] + maskSecret(m[2])
			continue
		}
		if m := headerArg.FindStringSubmatch(a); m != nil && credentialName.MatchString(m[1]) {
			out[i] = a[:len(a)-len(m[2])] + maskSecret(m[2])
			continue
		}
		if flagAlone.MatchString(a) && credentialName.MatchString(a) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			out[i+1] = maskSecret(out[i+1])
			i++
			continue
		}
		out[i] = maskURLs(a)
	}
	return out
}

// maskConfig hides literal credentials in a server entry from everyone but
// the admin (see above); the rest is unchanged.
func maskConfig(cfg json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(cfg, &m) != nil {
		return cfg
	}
	changed := false
	for _, key := range []string{"url", "args", "headers", "env"} {
		raw, ok := m[key]
		if !ok {
			continue
		}
		if b, ok := maskField(key, raw); ok {
			m[key] = b
			changed = true
		}
	}
	if !changed {
		return cfg
	}
	b, err := marshal(m)
	if err != nil {
		return cfg
	}
	return b
}

// maskField masks one member of an entry; ok reports a change.
func maskField(key string, raw json.RawMessage) (json.RawMessage, bool) {
	var v any
	switch key {
	case "url":
		var u string
		if json.Unmarshal(raw, &u) != nil || maskURLs(u) == u {
			return raw, false
		}
		v = maskURLs(u)
	case "args":
		var args []string
		if json.Unmarshal(raw, &args) != nil || slices.Equal(maskArgs(args), args) {
			return raw, false
		}
		v = maskArgs(args)
	case "headers", "env":
		var kv map[string]string
		if json.Unmarshal(raw, &kv) != nil {
			return raw, false
		}
		changed := false
		for k, s := range kv {
			if ms := maskValue(k, s); ms != s {
				kv[k] = ms
				changed = true
			}
		}
		if !changed {
			return raw, false
		}
		v = kv
	default:
		return raw, false
	}
	b, err := marshal(v)
	return b, err == nil
}

// keepMasked returns the entry a caller who saw stored masked (a project
// token) sent back as in, with every masked member it sent back as it
// read it put back to the stored value: an edit of the rest of the entry
// must not replace the admin's credential with the mask. Headers and env
// are compared value by value, a URL credential by credential (by where
// it is: user-info, or the parameter's name), args whole.
func keepMasked(stored, in json.RawMessage) json.RawMessage {
	var old, m map[string]json.RawMessage
	if json.Unmarshal(stored, &old) != nil || json.Unmarshal(in, &m) != nil {
		return in
	}
	changed := false
	var was, now string
	if json.Unmarshal(old["url"], &was) == nil && json.Unmarshal(m["url"], &now) == nil {
		if kept := keepURL(was, now); kept != now {
			m["url"], _ = marshal(kept)
			changed = true
		}
	}
	if raw, ok := m["args"]; ok && old["args"] != nil {
		if shown, ok := maskField("args", old["args"]); ok && sameValue(shown, raw) {
			m["args"] = old["args"]
			changed = true
		}
	}
	for _, key := range []string{"headers", "env"} {
		var was, now map[string]string
		if json.Unmarshal(old[key], &was) != nil || json.Unmarshal(m[key], &now) != nil {
			continue
		}
		kc := false
		for k, v := range now {
			if prev, ok := was[k]; ok && v != prev && v == maskValue(k, prev) {
				now[k] = prev
				kc = true
			}
		}
		if kc {
			m[key], _ = marshal(now)
			changed = true
		}
	}
	if !changed {
		return in
	}
	b, err := marshal(m)
	if err != nil {
		return in
	}
	return b
}

// sameValue reports whether two JSON documents hold the same value.
func sameValue(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := marshal(x)
	ya, _ := marshal(y)
	return bytes.Equal(xa, ya)
}

// marshal is json.Marshal without HTML escaping: a URL's & reads as &.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
