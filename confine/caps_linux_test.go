package confine

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func mknodChar(path string) error {
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		return &os.PathError{Op: "mknod", Path: path, Err: err}
	}
	return nil
}

// heldCaps fails naming each capability the status file (of /proc) says
// this process holds or could get back at its next execve (the bounding
// set), and no_new_privs unset: a confined call has none and it set. The
// bounding set of a user other than root outside a user namespace is left
// alone: only CAP_SETPCAP empties it, which such a launcher lacks, and it
// gives a process of that user nothing (no_new_privs: no set-id program,
// no file capability).
func heldCaps(status string) error {
	b, err := os.ReadFile(status)
	if err != nil {
		return err
	}
	sets := map[string]uint64{}
	nnp := false
	for _, line := range strings.Split(string(b), "\n") {
		name, hex, ok := strings.Cut(line, ":\t")
		if name == "NoNewPrivs" {
			nnp = hex == "1"
		}
		if !ok || !strings.HasPrefix(name, "Cap") {
			continue
		}
		if sets[name], err = strconv.ParseUint(hex, 16, 64); err != nil {
			return err
		}
	}
	var held []string
	check := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
	if os.Geteuid() == 0 || inUserNamespace() {
		check = append(check, "CapBnd")
	}
	for _, set := range check {
		if v, ok := sets[set]; !ok || v != 0 {
			held = append(held, fmt.Sprintf("%s %016x", set, v))
		}
	}
	if !nnp {
		held = append(held, "no no_new_privs")
	}
	if len(held) > 0 {
		return fmt.Errorf("holds %s", strings.Join(held, ", "))
	}
	return nil
}

// inUserNamespace tells whether this process is in a user namespace other
// than the machine's, whose map is the identity of every id.
func inUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	return err == nil && strings.Join(strings.Fields(string(b)), " ") != "0 0 4294967295"
}
