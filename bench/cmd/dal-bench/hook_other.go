//go:build !linux

package main

import "errors"

func otherSysEnterHooks() (int, error) { return 0, errors.New("eBPF needs Linux") }
