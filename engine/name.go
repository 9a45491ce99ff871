package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Name is the Docker name of a container or volume the gateway makes,
// from its parts: "switchboard-", the tag (what it is: "catalog", "ws"),
// "-", then the parts (the instance, project, row, path... the caller
// picks those that make it unique) joined by ".". It is the only place
// names are made, and it is injective: no two distinct (tag, parts)
// give one name, whatever the parts hold. Joining raw parts with a
// separator they may contain would not be ("x" + "memory-data" and
// "x-memory" + "data").
//
// Letters and digits stay as they are, and so does "-" within a part
// (not within the tag, which ends at the first "-"); every other byte is
// "_" and its two lowercase hex digits, and an empty part is a lone "_".
// So a part holds no "." and the tag no "-", and the name splits back into
// its parts. A name longer than MaxNameLen keeps its first characters
// and ends in "__" and 32 hex digits of the SHA-256 of the whole name;
// no unshortened name holds "__". Every name matches Docker's
// [a-zA-Z0-9][a-zA-Z0-9_.-]*.
func Name(tag string, parts ...string) string {
	var b strings.Builder
	b.WriteString(namePrefix)
	escapeName(&b, tag, false)
	for i, p := range parts {
		if i == 0 {
			b.WriteByte('-')
		} else {
			b.WriteByte('.')
		}
		escapeName(&b, p, true)
	}
	n := b.String()
	if len(n) <= MaxNameLen {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:MaxNameLen-len(hashSep)-hashLen] + hashSep + hex.EncodeToString(sum[:])[:hashLen]
}

// MaxNameLen bounds a name: a volume is a directory of that name, and a
// sized volume's image file adds a suffix; both stay far below the 255
// bytes a file name may have.
const MaxNameLen = 120

const (
	namePrefix = "switchboard-"
	hashSep    = "__"
	hashLen    = 32 // hex digits: 128 bits of SHA-256
)

// escapeName writes s encoded: letters and digits as they are, "-" too
// when dash, every other byte as "_" and two hex digits; "" as "_".
func escapeName(b *strings.Builder, s string, dash bool) {
	if s == "" {
		b.WriteByte('_')
		return
	}
	const hexDigits = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || dash && c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
}

// The names earlier gateway versions gave volumes, joined from parts
// that could collide. They exist only to find such a volume again (see
// FindVolume, which adopts one only when its labels are the owner's);
// nothing new is made under them.

var legacyChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// legacySlug is the old VolumeSlug: s with runs of other characters
// turned into "_", trimmed, at most n bytes.
func legacySlug(s string, n int) string {
	slug := strings.Trim(legacyChars.ReplaceAllString(s, "_"), "_.-")
	if len(slug) > n {
		slug = slug[:n]
	}
	return slug
}

// LegacyCatalogVolumes are the names a catalog entry's volume of project
// had before Name: without the instance, then with it.
func LegacyCatalogVolumes(instance, project, volume string) []string {
	return []string{
		"switchboard-catalog-" + legacySlug(project, 64) + "-" + volume,
		"switchboard-" + legacySlug(instance, 40) + "-catalog-" + legacySlug(project, 64) + "-" + volume,
	}
}

// LegacyHostedVolume is the name a hosted server's volume at path had
// before Name.
func LegacyHostedVolume(rowID, path string) string {
	return "switchboard-" + rowID + "-" + legacySlug(path, 40)
}
