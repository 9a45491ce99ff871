// Package keyset encodes the position of a listing for keyset paging: the
// (started_at, id) of the last row a page returned. Both stores use it, so
// a cursor means the same thing whichever database made it.
package keyset

import (
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Cursor is the sort key of the last row of a page; the next page starts
// strictly after it.
type Cursor struct {
	At time.Time // microsecond precision
	ID int64
}

// String encodes c as an opaque, URL-safe token.
func (c Cursor) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.At.UnixMicro()))
	binary.BigEndian.PutUint64(b[8:], uint64(c.ID))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Parse decodes a token made by Cursor.String.
// Errors: switchboard.ErrInvalid.
func Parse(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return Cursor{}, switchboard.Errorf(switchboard.ErrInvalid, "malformed cursor: pass the Next cursor of the previous page unchanged")
	}
	return Cursor{
		At: time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC(),
		ID: int64(binary.BigEndian.Uint64(b[8:])),
	}, nil
}
