package vclock

import "fmt"

// Compare checks a replayed clock log against its recording, stream by
// stream: the same streams, the same number of clock reads, and in strict
// mode the same timer schedule (deadline, registration order). It returns
// one entry per diverging stream, naming the first difference.
func Compare(recorded, replayed *File) []DriftEntry {
	var out []DriftEntry
	got := map[string]StreamLog{}
	for _, s := range replayed.Streams {
		got[s.Stream] = s
	}
	want := map[string]bool{}
	for _, r := range recorded.Streams {
		want[r.Stream] = true
		s, ok := got[r.Stream]
		switch {
		case !ok:
			out = append(out, DriftEntry{Stream: r.Stream, What: "process", Detail: "the recorded process stream never started"})
		case r.Reported && s.Reported && r.Reads != s.Reads:
			out = append(out, DriftEntry{Stream: r.Stream, What: "clock", Detail: fmt.Sprintf("%d clock reads, the recording has %d", s.Reads, r.Reads)})
		default:
			if d := firstTimerDifference(r.Timers, s.Timers); d != "" {
				out = append(out, DriftEntry{Stream: r.Stream, What: "timers", Detail: d})
			}
		}
	}
	for _, s := range replayed.Streams {
		if !want[s.Stream] {
			out = append(out, DriftEntry{Stream: s.Stream, What: "process", Detail: "a process stream the recording does not have"})
		}
	}
	return out
}

func firstTimerDifference(want, got [][2]int64) string {
	for i := 0; i < len(want) && i < len(got); i++ {
		if want[i] != got[i] {
			return fmt.Sprintf("timer firing %d was (deadline %d ns, registration %d), the recording has (deadline %d ns, registration %d)",
				i+1, got[i][0], got[i][1], want[i][0], want[i][1])
		}
	}
	if len(want) != len(got) {
		return fmt.Sprintf("%d timer firings, the recording has %d", len(got), len(want))
	}
	return ""
}
