// Package safetext spells a name an upstream chose (a tool name) so that
// every place the gateway keeps or exposes it can hold it: the call log's
// text columns (PostgreSQL refuses NUL in text) and Prometheus label
// values (whose text format would carry a raw NUL).
package safetext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Of returns s unchanged when it is UTF-8 without NUL characters, which is
// every name a server is likely to use. Anything else is spelled as a Go
// string literal (strconv.Quote): surrounded by double quotes, a NUL as
// \x00, other control characters and invalid bytes escaped the same way,
// so the stored name is printable and tells what was sent. Such a spelling
// cannot be told from a name that really is that literal, quotes
// included; MCP tool names are letters, digits, '_', '-' and '.', so no
// real one is.
func Of(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strconv.Quote(s)
}
