// Command gostat prints what Go's os package shows of a file, without dal's
// agent package: os.Stat, os.Lstat and File.Stat, modification time in ns
// and inode number.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func show(call string, fi os.FileInfo, err error) {
	if err != nil {
		fmt.Println("go", call, "failed")
		return
	}
	fmt.Println("go", call, fi.ModTime().UnixNano(), fi.Sys().(*syscall.Stat_t).Ino)
}

func main() {
	p := os.Args[1]
	fi, err := os.Stat(p)
	show("stat", fi, err)
	fi, err = os.Lstat(p)
	show("lstat", fi, err)
	f, err := os.Open(p)
	if err == nil {
		fi, err = f.Stat()
	}
	show("fstat", fi, err)
}
