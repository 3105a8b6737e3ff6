package procs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ID names a process as it saw itself: its id, the PID namespace it had
// that id in, and when it started ("" and 0 where the system does not
// tell). A confined call runs in a PID namespace of its own, where its ids
// are not the host's: a record a process wrote of itself names it through
// its ID. The start time tells the process from a later one given the same
// id, in the same namespace or in a new one the kernel named alike.
type ID struct {
	PID   int
	NS    string
	Start uint64 // in clock ticks since the machine booted
}

// Self is the running process's ID.
func Self() ID {
	return ID{PID: os.Getpid(), NS: ownNamespace(), Start: startOf("self")}
}

// Alive reports whether the process named still runs (see Alive).
func (id ID) Alive() bool {
	return Alive(id.Host())
}

// Host is the process's id as this process sees it, or 0 when no process
// of that namespace has that id any more (its namespace is gone with it).
func (id ID) Host() int {
	if id.PID <= 0 {
		return 0
	}
	if id.NS == "" || id.NS == ownNamespace() {
		if id.Start != 0 && startOf(strconv.Itoa(id.PID)) != id.Start {
			return 0 // gone, its id given to another
		}
		return id.PID
	}
	return inNamespace(id)
}

// String is the ID as one line: the id, then its namespace and start
// time when known.
func (id ID) String() string {
	if id.NS == "" {
		return strconv.Itoa(id.PID)
	}
	return strconv.Itoa(id.PID) + " " + id.NS + " " + strconv.FormatUint(id.Start, 10)
}

// ParseID reads an ID written as String writes it (or by LastJobID).
func ParseID(s string) (ID, error) {
	f := strings.Fields(s)
	bad := fmt.Errorf("not a process id: %q", s)
	if len(f) != 1 && len(f) != 3 {
		return ID{}, bad
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return ID{}, bad
	}
	id := ID{PID: pid}
	if len(f) == 3 {
		if id.Start, err = strconv.ParseUint(f[2], 10, 64); err != nil {
			return ID{}, bad
		}
		id.NS = f[1]
	}
	return id, nil
}
