package procs

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ownNamespace names this process's PID namespace as /proc shows it
// ("pid:[4026531836]").
func ownNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// inNamespace finds, among the processes this one sees, the one id names:
// the last id of a process's NSpid line is its id in the namespace it
// lives in. 0 when there is none.
func inNamespace(id ID) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := strconv.Itoa(id.PID)
	for _, e := range entries {
		host, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || link != id.NS {
			continue
		}
		if innermost("/proc/"+e.Name()+"/status") == want && (id.Start == 0 || startOf(e.Name()) == id.Start) {
			return host
		}
	}
	return 0
}

// startOf is when the process /proc/<pid> started, in clock ticks since
// the machine booted (the 22nd field of its stat line); 0 when unknown.
// The command name may hold spaces: fields are counted after its ')'.
func startOf(pid string) uint64 {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64) // fields 3.. follow the name
	return n
}

// innermost is the last id of the NSpid line of a /proc/<pid>/status file.
func innermost(status string) string {
	f, err := os.Open(status)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			ids := strings.Fields(rest)
			if len(ids) == 0 {
				return ""
			}
			return ids[len(ids)-1]
		}
	}
	return ""
}
