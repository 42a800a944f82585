//go:build !linux

package main

import "errors"

func attachEmptyHook() (func(), error) { return nil, errors.New("eBPF needs Linux") }

func otherSysEnterHooks() (int, error) { return 0, errors.New("eBPF needs Linux") }
