package replay

import "io"

// multi writes to every non-nil writer.
func multi(ws ...io.Writer) io.Writer {
	var out []io.Writer
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	return io.MultiWriter(out...)
}
