//go:build !linux

package worktree

// changeWatch, outside Linux, cannot tell: the tree may always have
// changed.
type changeWatch struct{}

func watchTree(string) *changeWatch { return nil }

// Changed reports that the tree may have changed.
func (w *changeWatch) Changed() bool { return true }

// Close does nothing.
func (w *changeWatch) Close() {}
