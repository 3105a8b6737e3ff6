//go:build !unix

package confine

import "errors"

func notDirError() error { return errors.New("not a directory") }
