package sysvirt

// Stream returns the process stream ("0", "0.1", ...) of thread tid, ""
// for a process the supervisor does not know. Safe to call from any
// goroutine (the sandbox's policy gate names the caller of an exec).
func (s *Supervisor) Stream(tid int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.lookup(tid); p != nil {
		return p.stream
	}
	return ""
}
