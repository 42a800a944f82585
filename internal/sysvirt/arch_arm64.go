package sysvirt

const sysTime = -1

func (s *Supervisor) waitLegacy(n *Notif) bool { return false }

var legacyNotified []int

var legacyTimed [][2]int

const sysEpollWait = -2

const (
	sysPoll   = -3
	sysSelect = -4
)

const (
	sysAlarm = -5
	sysPause = -6
)

// fsBase: arm64 has no dal vDSO, so no quiet thread to name (quiet.go).
func fsBase(int) (uint64, bool) { return 0, false }

func fsgsbase() bool { return false }
