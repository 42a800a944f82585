package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Under a virtual clock (strict mode) the /proc files that describe the
// machine's time and load are the virtual machine's, the same in every
// run on a host, instead of the host's (a tool that prints its uptime,
// load or boot time would never repeat), as LXCFS serves a container's:
//
//   - /proc/uptime shows the virtual monotonic clock's origin, the
//     uptime at the run's start (CLOCK_BOOTTIME reads start there), for
//     both fields (time up and idle time of one CPU); it does not advance;
//   - /proc/loadavg shows no load, one process running of one, the last
//     pid the agent's, 100;
//   - /proc/stat shows the virtual boot time (btime: the virtual
//     realtime clock's origin less /proc/uptime's), no CPU time but
//     /proc/uptime's idle time (shared by the host's CPUs, which it
//     lists), no interrupt, context switch or softirq (as many counters
//     as the host has), 100 processes started, one running;
//   - /proc/meminfo keeps the machine's constants (MemTotal, SwapTotal,
//     CommitLimit, VmallocTotal, the huge pages' total and size) and
//     shows half of the memory free and available, all swap and huge
//     pages free, and nothing else in use: what sysinfo(2) says in the
//     syscall layer (package sysvirt).
//
// All are regular files of a tmpfs attached nowhere else, bound
// read-only over /proc's (a program that keeps the file open and seeks
// back reads the same again). What /proc says per process stays real:
// /proc/<pid>/stat's start time counts real clock ticks since the host's
// boot (ps's START and TIME columns differ in every run).

// virtualProcClock mounts them. It runs after mountProc, whose /proc/stat
// and /proc/meminfo are still the host's.
func virtualProcClock(epochNS, monoNS int64) error {
	fail := func(err error) error {
		return fmt.Errorf("sandbox: serve /proc/uptime, loadavg, stat and meminfo from the virtual clock: %v", err)
	}
	hostStat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return fail(err)
	}
	hostMem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return fail(err)
	}
	dir, err := detachedTmpfs()
	if err != nil {
		return fail(err)
	}
	defer unix.Close(dir)
	up := fmt.Sprintf("%d.%02d", monoNS/1e9, monoNS%1e9/1e7)
	files := [][2]string{
		{"uptime", up + " " + up + "\n"},
		{"loadavg", fmt.Sprintf("0.00 0.00 0.00 1/1 %d\n", agentPID)},
		{"stat", virtualStat(hostStat, epochNS, monoNS)},
		{"meminfo", virtualMeminfo(hostMem)},
	}
	for _, f := range files {
		if err := writeAt(dir, f[0], []byte(f[1])); err != nil {
			return fail(err)
		}
		fd, err := unix.OpenTree(dir, f[0], unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return fail(err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
		if err == nil {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, "/proc/"+f[0], unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil {
			return fail(err)
		}
	}
	return nil
}

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on every
// architecture Linux runs dal on).
const userHZ = 100

// virtualStat is /proc/stat for the virtual machine, from the host's
// (host): its CPUs and the number of its interrupt and softirq counters.
func virtualStat(host []byte, epochNS, monoNS int64) string {
	var cpus []string
	irqs, softirqs := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(host))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
		case strings.HasPrefix(f[0], "cpu") && f[0] != "cpu":
			cpus = append(cpus, f[0])
		case f[0] == "intr":
			irqs = len(f) - 2
		case f[0] == "softirq":
			softirqs = len(f) - 2
		}
	}
	if len(cpus) == 0 {
		cpus = []string{"cpu0"}
	}
	idle := monoNS / (1e9 / userHZ)
	var b strings.Builder
	cpuLine := func(name string, idle int64) {
		fmt.Fprintf(&b, "%s 0 0 0 %d 0 0 0 0 0 0\n", name, idle)
	}
	cpuLine("cpu ", idle)
	for i, name := range cpus {
		share := idle / int64(len(cpus))
		if i == 0 {
			share += idle % int64(len(cpus))
		}
		cpuLine(name, share)
	}
	zeros := func(name string, n int) {
		b.WriteString(name + " 0")
		b.WriteString(strings.Repeat(" 0", max(n, 0)))
		b.WriteByte('\n')
	}
	zeros("intr", irqs)
	b.WriteString("ctxt 0\n")
	fmt.Fprintf(&b, "btime %d\n", (epochNS-monoNS)/1e9)
	fmt.Fprintf(&b, "processes %d\n", agentPID)
	b.WriteString("procs_running 1\nprocs_blocked 0\n")
	zeros("softirq", softirqs)
	return b.String()
}

// meminfoKept are /proc/meminfo's fields that are the machine's
// constants: kept from the host's.
var meminfoKept = map[string]bool{
	"MemTotal": true, "SwapTotal": true, "CommitLimit": true, "VmallocTotal": true,
	"HugePages_Total": true, "Hugepagesize": true, "Hugetlb": true,
}

// virtualMeminfo is /proc/meminfo for the virtual machine, from the
// host's (host): its fields, in its order and the kernel's layout.
func virtualMeminfo(host []byte) string {
	values := map[string]uint64{}
	type field struct{ key, unit string }
	var fields []field
	sc := bufio.NewScanner(bytes.NewReader(host))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		values[key] = v
		fields = append(fields, field{key, strings.Join(f[1:], " ")})
	}
	shown := func(key string) uint64 {
		switch key {
		case "MemFree", "MemAvailable":
			return values["MemTotal"] / 2
		case "SwapFree":
			return values["SwapTotal"]
		case "HugePages_Free":
			return values["HugePages_Total"]
		}
		if meminfoKept[key] {
			return values[key]
		}
		return 0
	}
	var b strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&b, "%-16s%8d", f.key+":", shown(f.key))
		if f.unit != "" {
			b.WriteString(" " + f.unit)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
