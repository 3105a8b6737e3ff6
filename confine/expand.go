package confine

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Rule is one Landlock rule: a real path (no link in it) and what it grants.
type Rule struct {
	Path  string
	Write bool // create, change, remove and rename beneath it (and read); else read and run
	Dir   bool // a folder: the rule covers everything beneath it
	Data  bool // with Write: no named pipe or socket made beneath it (Path.Data)
}

// Plan is an access expanded into the rules that enforce it.
type Plan struct {
	Rules []Rule
	// Missing are the grants that name nothing: they grant nothing (a
	// folder the call needs must exist before it starts).
	Missing []Path
	// Narrowed are the folders that were granted entry by entry, because a
	// denied or protected path lies beneath them: nothing can be created,
	// removed or renamed directly in them, and they cannot be listed.
	Narrowed []string
	// Unlisted are narrowed folders whose entries could not be listed:
	// nothing beneath them is granted.
	Unlisted []string
}

// bound is a denied or protected path, resolved.
type bound struct{ path, key string }

// Expand turns an access into Landlock rules, reading the folders it must
// narrow from t. It is the whole of the access's meaning: what it returns is
// what the kernel is asked to enforce.
func Expand(p Access, t Tree) (Plan, error) {
	x, err := check(p, t)
	if err != nil {
		return Plan{}, err
	}
	return x.plan(), nil
}

// check is the first half of Expand, which fails where the access does:
// every path resolved and checked against what is denied and protected.
// What is left (plan) is listing the folders it narrows, which fails
// nowhere.
func check(p Access, t Tree) (*expander, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t = &memoTree{Tree: t, modes: map[string]memoMode{}}
	deny, err := bounds(t, p.Deny)
	if err != nil {
		return nil, err
	}
	protect, err := bounds(t, p.Protect)
	if err != nil {
		return nil, err
	}
	hide, err := bounds(t, p.Hide)
	if err != nil {
		return nil, err
	}
	e := &expander{t: t, rules: map[string]Rule{}, hide: hide}
	for _, g := range p.Write {
		if err := e.grant(g, true, deny, protect); err != nil {
			return nil, err
		}
	}
	for _, g := range p.Read {
		if err := e.grant(g, false, deny, nil); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// plan is the second half of Expand: the grants checked, walked in the
// order of the access.
func (e *expander) plan() Plan {
	for _, w := range e.grants {
		e.walk(w.path, w.dir, w.write, w.data, w.excl)
	}
	plan := Plan{Missing: e.missing, Narrowed: e.narrowed, Unlisted: e.unlisted}
	for _, r := range e.rules {
		plan.Rules = append(plan.Rules, r)
	}
	slices.SortFunc(plan.Rules, func(a, b Rule) int { return strings.Compare(a.Path, b.Path) })
	slices.Sort(plan.Narrowed)
	plan.Narrowed = slices.Compact(plan.Narrowed)
	return plan
}

// bounds resolves denied or protected paths. Only the real path counts:
// rules are made on real paths, and a link (where the path is written, or
// on the way to it) is never granted.
func bounds(t Tree, paths []Path) ([]bound, error) {
	var out []bound
	for _, p := range paths {
		real, _, _, err := resolve(t, p.Path)
		if err != nil {
			return nil, &PathError{Key: p.Key, Path: p.Path, Reason: "cannot be resolved: " + err.Error()}
		}
		out = append(out, bound{real, p.Key})
	}
	return out, nil
}

type expander struct {
	t                  Tree
	grants             []checked
	rules              map[string]Rule
	hide               []bound
	missing            []Path
	narrowed, unlisted []string
}

// checked is a grant checked, to be walked.
type checked struct {
	path             string
	dir, write, data bool
	excl             []string
}

func (e *expander) grant(g Path, write bool, deny, protect []bound) error {
	real, typ, exists, err := resolve(e.t, g.Path)
	if err != nil {
		return &PathError{Key: g.Key, Path: g.Path, Reason: "cannot be resolved: " + err.Error()}
	}
	for _, d := range deny {
		if within(real, d.path) {
			return &PathError{Key: g.Key, Path: g.Path, Reason: fmt.Sprintf("lies in %s, which is never readable (%s)", d.path, d.key)}
		}
	}
	if !exists {
		e.missing = append(e.missing, g)
		return nil
	}
	var excl []string
	for _, d := range slices.Concat(deny, e.hide) {
		if beneath(d.path, real) {
			excl = append(excl, d.path)
		}
	}
	for _, p := range protect {
		if p.path == real {
			return &PathError{Key: g.Key, Path: g.Path, Reason: fmt.Sprintf("is never writable (%s)", p.key)}
		}
		if beneath(p.path, real) {
			excl = append(excl, p.path)
		}
	}
	e.grants = append(e.grants, checked{real, typ.IsDir(), write, write && g.Data, excl})
	return nil
}

// walk grants path, or, when paths to keep out (excl) lie beneath it, each
// of its entries but those, down to them. Links are never granted.
func (e *expander) walk(path string, dir, write, data bool, excl []string) {
	// The paths kept out, by the entry of path they lie in.
	var inner map[string][]string
	for _, x := range excl {
		if !beneath(x, path) {
			continue
		}
		rest := strings.TrimPrefix(x[len(path):], "/")
		name, _, _ := strings.Cut(rest, "/")
		if inner == nil {
			inner = map[string][]string{}
		}
		inner[name] = append(inner[name], x)
	}
	if !dir || inner == nil {
		e.add(Rule{Path: path, Write: write, Dir: dir, Data: data})
		return
	}
	e.narrowed = append(e.narrowed, path)
	entries, err := e.t.ReadDir(path)
	if err != nil {
		// Nothing beneath it is granted: the safe side.
		e.unlisted = append(e.unlisted, path)
	}
	for _, ent := range entries {
		if ent.Type&fs.ModeSymlink != 0 {
			continue
		}
		p := filepath.Join(path, ent.Name)
		xs, ok := inner[ent.Name]
		if ok && slices.Contains(xs, p) {
			continue // the entry itself is kept out
		}
		if !ok {
			e.add(Rule{Path: p, Write: write, Dir: ent.Type.IsDir(), Data: data})
			continue
		}
		e.walk(p, ent.Type.IsDir(), write, data, xs)
	}
}

func (e *expander) add(r Rule) {
	if old, ok := e.rules[r.Path]; ok {
		// The wider grant wins: a full write over data only.
		full := r.Write && !r.Data || old.Write && !old.Data
		r.Write = r.Write || old.Write
		r.Data = r.Write && !full
	}
	e.rules[r.Path] = r
}

// beneath tells whether path lies strictly beneath folder.
func beneath(path, folder string) bool {
	if folder == "/" {
		return path != "/" && strings.HasPrefix(path, "/")
	}
	return strings.HasPrefix(path, folder+"/")
}

// within tells whether path is folder or lies beneath it.
func within(path, folder string) bool { return path == folder || beneath(path, folder) }

// memoTree remembers the types it was asked for during one expansion: the
// paths of an access share their first folders, which need one look each.
type memoTree struct {
	Tree
	modes map[string]memoMode
}

type memoMode struct {
	mode fs.FileMode
	err  error
}

func (m *memoTree) Lstat(name string) (fs.FileMode, error) {
	if r, ok := m.modes[name]; ok {
		return r.mode, r.err
	}
	mode, err := m.Tree.Lstat(name)
	m.modes[name] = memoMode{mode, err}
	return mode, err
}
