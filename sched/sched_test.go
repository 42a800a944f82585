package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/dal-runtime/dal/vclock"
)

func TestFiringOrderIsDeadlineThenRegistration(t *testing.T) {
	clock := vclock.New(vclock.DefaultConfig())
	s := New(100)
	var order []string
	at := func(d time.Duration, name string) {
		s.Add(clock.Offset()+int64(d), 0, func() { order = append(order, name) })
	}
	at(300*time.Millisecond, "a")
	at(100*time.Millisecond, "b")
	at(100*time.Millisecond, "c")
	at(2*time.Second, "d")
	for s.Len() > 0 {
		s.RunIdle(clock.AdvanceTo)
	}
	// b and c share a deadline: registration order breaks the tie.
	if want := []string{"b", "c", "a", "d"}; !slices.Equal(order, want) {
		t.Fatalf("fired %v, want %v", order, want)
	}
	if clock.Offset() != int64(2*time.Second) {
		t.Fatalf("idle advance left the clock at %d", clock.Offset())
	}
	if f := s.Fired(); len(f) != 4 || f[0].Seq != 2 || f[1].Seq != 3 {
		t.Fatalf("fired log %+v", f)
	}
}

func TestRepeatingAndCancel(t *testing.T) {
	clock := vclock.New(vclock.DefaultConfig())
	s := New(100)
	n := 0
	id := s.Add(10, 10, func() { n++ })
	other := s.Add(25, 0, nil)
	if !s.Cancel(other) || s.Cancel(other) {
		t.Fatal("cancel reported wrongly")
	}
	for range 3 {
		s.RunIdle(clock.AdvanceTo)
	}
	if n != 3 || clock.Offset() != 30 {
		t.Fatalf("interval fired %d times, clock %d", n, clock.Offset())
	}
	s.Cancel(id)
	if s.Len() != 0 || s.RunIdle(clock.AdvanceTo) != 0 {
		t.Fatal("cancelled interval still pending")
	}
}

func TestFiredLogIsCapped(t *testing.T) {
	s := New(2)
	for i := range 5 {
		s.Add(int64(i), 0, nil)
	}
	for s.PopDue(10) != nil {
	}
	if len(s.Fired()) != 2 {
		t.Fatalf("kept %d firings, cap 2", len(s.Fired()))
	}
}
