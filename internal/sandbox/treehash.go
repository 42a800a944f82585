package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"sync"

	"github.com/dal-runtime/dal/internal/safefs"
)

// TreeHash hashes the tree under dir: every file, directory and symlink
// below it (not dir itself) by path, kind, mode bits, and content or
// target, in a fixed order. Times, owners, xattrs and special files do not
// count. It reads every file (in parallel).
func TreeHash(dir string) (string, error) {
	return TreeHashLayers(dir)
}

// TreeHashLayers is [TreeHash] of the merged view of overlay layers (top
// first), e.g. (Upper(cfg), cfg.Workspace) for the run's post-run state
// before it is applied. TreeHashLayers(d) == TreeHash(d).
func TreeHashLayers(layers ...string) (string, error) {
	v, err := openView(layers)
	if err != nil {
		return "", fmt.Errorf("hash the tree %s: %w", layers[0], err)
	}
	defer v.close()
	h, err := treeHash(v)
	if err != nil {
		return "", fmt.Errorf("hash the tree %s: %w", layers[0], err)
	}
	return h, nil
}

type hashed struct {
	rel   string
	layer *safefs.Dir
	fi    fs.FileInfo
	e     Entry
	done  chan struct{}
	err   error
}

func treeHash(v view) (string, error) {
	var items []*hashed
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := v.list(rel)
		if err != nil {
			return err
		}
		for _, n := range ents {
			r := path.Join(rel, n.name)
			layer, fi, err := v.entry(r, n)
			if err != nil {
				return err
			}
			if fi == nil || kindOf(fi) == "" {
				continue
			}
			it := &hashed{rel: r, layer: layer, fi: fi, e: Entry{Kind: kindOf(fi), Mode: fi.Mode() & modeBits, Size: fi.Size()}}
			items = append(items, it)
			if it.e.Kind == KindDir {
				if err := walk(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return "", err
	}

	// Hash contents with one worker per CPU; consume in order.
	work := make(chan *hashed)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if it.e.Kind != KindDir {
					it.e, it.err = entryOf(it.layer, it.rel, it.fi)
				}
				close(it.done)
			}
		}()
	}
	for _, it := range items {
		it.done = make(chan struct{})
	}
	go func() {
		for _, it := range items {
			work <- it
		}
		close(work)
	}()
	h := sha256.New()
	var ferr error
	for _, it := range items {
		<-it.done
		if it.err != nil && ferr == nil {
			ferr = it.err
		}
		fmt.Fprintf(h, "%s\x00%s\x00%04o\x00%s\n", it.rel, it.e.Kind, unixMode(it.e.Mode), it.e.Hash)
	}
	wg.Wait()
	if ferr != nil {
		return "", ferr
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
