package safetext

import "testing"

func TestOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"echo", "echo"},
		{"ünïcode_tool", "ünïcode_tool"},
		{"a\x00b", `"a\x00b"`},
		{"\x00", `"\x00"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"nul\x00and\nnewline", `"nul\x00and\nnewline"`},
	} {
		if got := Of(tc.in); got != tc.want {
			t.Errorf("Of(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
