package sysvirt

import "golang.org/x/sys/unix"

// stat and lstat, which only older ABIs have.
const (
	sysStat  = unix.SYS_STAT
	sysLstat = unix.SYS_LSTAT
)

// statOf is the struct stat the kernel makes of st (cp_new_stat).
func statOf(st *unix.Statx_t) unix.Stat_t {
	return unix.Stat_t{
		Dev:     unix.Mkdev(st.Dev_major, st.Dev_minor),
		Ino:     st.Ino,
		Nlink:   uint64(st.Nlink),
		Mode:    uint32(st.Mode),
		Uid:     st.Uid,
		Gid:     st.Gid,
		Rdev:    unix.Mkdev(st.Rdev_major, st.Rdev_minor),
		Size:    int64(st.Size),
		Blksize: int64(st.Blksize),
		Blocks:  int64(st.Blocks),
		Atim:    unix.Timespec{Sec: st.Atime.Sec, Nsec: int64(st.Atime.Nsec)},
		Mtim:    unix.Timespec{Sec: st.Mtime.Sec, Nsec: int64(st.Mtime.Nsec)},
		Ctim:    unix.Timespec{Sec: st.Ctime.Sec, Nsec: int64(st.Ctime.Nsec)},
	}
}
