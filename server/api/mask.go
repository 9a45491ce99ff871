package api

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/switchboard-mcp/switchboard/secrets"
)

// What a project token reads of a server entry. The admin reads entries
// as stored; everyone else reads every literal credential masked, wherever
// the entry holds it: a header or env value under a credential-like name,
// the user-info of a URL and a credential-like query or fragment parameter
// (in "url" and in any args, header or env value), and a credential-like
// flag's value in args (--token=..., --password ..., "Authorization:
// Bearer ..."). Values made only of ${REF}s are shown as written: the
// reference names no secret.

// masked is the value a project token reads in place of a literal
// credential.
const masked = "[redacted]"

// maskSecret is v, or masked when v is a literal credential.
func maskSecret(v string) string {
	if v == "" || secrets.OnlyRefs(v) {
		return v
	}
	return masked
}

// maskValue masks a header or env value: whole under a credential-like
// name, else the credentials of the URLs in it.
func maskValue(name, v string) string {
	if secrets.IsCredentialName(name) {
		return maskSecret(v)
	}
	return maskURLs(v)
}

// maskURLs masks the credentials of every URL ("scheme://...") in s: the
// user-info's password (or, without one, its user, which is then the
// token: https://ghp_x@github.com) and each credential-like parameter of
// the query and the fragment. The rest is left as written.
func maskURLs(s string) string {
	return secrets.RewriteURLs(s, func(_, v string) string { return maskSecret(v) })
}

// keepURL returns now, a URL a project token sent, with each credential
// that reads "[redacted]" where stored held a masked one put back: a
// token that changes a URL's path keeps the admin's password and api_key.
func keepURL(stored, now string) string {
	was := map[string]string{}
	secrets.RewriteURLs(stored, func(slot, v string) string {
		was[slot] = v
		return v
	})
	return secrets.RewriteURLs(now, func(slot, v string) string {
		if prev, ok := was[slot]; ok && v == masked && maskSecret(prev) == masked {
			return prev
		}
		return v
	})
}

// maskArgs masks a command's arguments: each credential
// secrets.RewriteArgs finds (a credential-like flag's value, a URL's).
func maskArgs(args []string) []string {
	return secrets.RewriteArgs(args, func(_, v string) string { return maskSecret(v) })
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
