package confine

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"peal/confine/launch"
)

func mknodChar(path string) error {
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		return &os.PathError{Op: "mknod", Path: path, Err: err}
	}
	return nil
}

// heldCaps fails naming each of launch.DroppedCaps that the status file (of
// /proc) says this process holds or, run as root, could get back at its
// next execve (the bounding set): what a confined call must not have.
func heldCaps(status string) error {
	b, err := os.ReadFile(status)
	if err != nil {
		return err
	}
	sets := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, hex, ok := strings.Cut(line, ":\t")
		if !ok || !strings.HasPrefix(name, "Cap") {
			continue
		}
		if sets[name], err = strconv.ParseUint(hex, 16, 64); err != nil {
			return err
		}
	}
	check := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
	if os.Geteuid() == 0 {
		check = append(check, "CapBnd")
	}
	var held []string
	for _, c := range launch.DroppedCaps {
		for _, set := range check {
			if sets[set]&(1<<c.N) != 0 {
				held = append(held, set+" "+c.Name)
			}
		}
	}
	if len(held) > 0 {
		return fmt.Errorf("holds %s", strings.Join(held, ", "))
	}
	return nil
}
