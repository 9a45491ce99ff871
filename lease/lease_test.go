package lease

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestAlive(t *testing.T) {
	st := openStore(t)
	p, err := Start(t.Context(), st, Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())

	// A process of this host that has ended: dead at once, even though
	// its lease has not expired (kill -9, then a restart).
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	gone := current()
	gone.pid = child.Process.Pid
	if _, err := st.AcquireLease(t.Context(), Prefix+gone.String(), gone.String(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// A live process of this host holding a lease (a second gateway on
	// the same data dir): alive.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	live := current()
	live.pid = sleeper.Process.Pid
	live.start, _ = startTime(live.pid)
	if _, err := st.AcquireLease(t.Context(), Prefix+live.String(), live.String(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// Another host's process: only its lease tells.
	remote := ident{boot: "0123abcd", pidNS: 1, pid: 42, start: 7, tag: "a1"}.String()
	if _, err := st.AcquireLease(t.Context(), Prefix+remote, remote, time.Hour); err != nil {
		t.Fatal(err)
	}
	unleased := ident{boot: "0123abcd", pidNS: 1, pid: 43, start: 7, tag: "a1"}.String()

	for _, tc := range []struct {
		name, owner string
		want        bool
	}{
		{"self", p.ID(), true},
		{"ended on this host", gone.String(), false},
		{"running on this host", live.String(), true},
		{"leased elsewhere", remote, true},
		{"no lease elsewhere", unleased, false},
		{"an older gateway's label", "pool", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Alive(t.Context(), tc.owner)
			if err != nil || got != tc.want {
				t.Errorf("Alive(%q) = %v, %v; want %v", tc.owner, got, err, tc.want)
			}
		})
	}

	// A released lease ends the remote owner; this process's own lease
	// goes with Close.
	if err := st.ReleaseLease(t.Context(), Prefix+remote, remote); err != nil {
		t.Fatal(err)
	}
	if alive, _ := p.Alive(t.Context(), remote); alive {
		t.Error("a released owner is still alive")
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListLeases(t.Context(), Prefix+p.ID())
	if err != nil || len(list) != 0 {
		t.Errorf("after Close: leases %v, %v; want none", list, err)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestParse(t *testing.T) {
	id := current()
	got, ok := parse(id.String())
	if !ok || got != id {
		t.Fatalf("parse(%q) = %+v, %v; want %+v", id.String(), got, ok, id)
	}
	for _, bad := range []string{"", "pool", "sb-1234", "abcdefgh-1-2-3", "abcdefgh-1-2-3-", "abcdefgh-x-2-3-t", "abcdefgh-1-0-3-t", "abc-1-2-3-t"} {
		if _, ok := parse(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
	if !id.running() {
		t.Error("this process is not running by its own ident")
	}
}

// TestAliveOtherStore: a gateway of this host that keeps its lease in
// another store (another data dir or database, the same instance name)
// is alive while it runs, though this store holds no lease of it; one in
// this very process is alive until it closes (issue 33).
func TestAliveOtherStore(t *testing.T) {
	p, err := Start(t.Context(), openStore(t), Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())

	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	elsewhere := current()
	elsewhere.pid = sleeper.Process.Pid
	elsewhere.start, _ = startTime(elsewhere.pid)
	if alive, err := p.Alive(t.Context(), elsewhere.String()); err != nil || !alive {
		t.Errorf("a running process of this host leased in another store: Alive = %v, %v; want true", alive, err)
	}

	other, err := Start(t.Context(), openStore(t), Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if alive, err := p.Alive(t.Context(), other.ID()); err != nil || !alive {
		t.Errorf("an open gateway of this process on another store: Alive = %v, %v; want true", alive, err)
	}
	if err := other.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if alive, err := p.Alive(t.Context(), other.ID()); err != nil || alive {
		t.Errorf("a closed gateway of this process: Alive = %v, %v; want false", alive, err)
	}

	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if alive, err := p.Alive(t.Context(), elsewhere.String()); err != nil || alive {
		t.Errorf("the process after it ended: Alive = %v, %v; want false", alive, err)
	}
}
