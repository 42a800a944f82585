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
