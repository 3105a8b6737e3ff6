package procs

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestIDStringParse(t *testing.T) {
	for _, id := range []ID{{PID: 12}, {PID: 3, NS: "pid:[4026532001]", Start: 88}} {
		got, err := ParseID(id.String() + "\n")
		if err != nil || got != id {
			t.Errorf("ParseID(%q) = %v, %v", id.String(), got, err)
		}
	}
	for _, bad := range []string{"", "x", "0", "-1", "1 a", "1 a b", "1 a b c"} {
		if id, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) = %v, want an error", bad, id)
		}
	}
}

// A process in a PID namespace of its own knows itself as 1 there; its ID
// names it from outside, alive or gone, and its own pid is never taken
// for the host's process 1.
func TestIDOfAnotherNamespace(t *testing.T) {
	if os.Getenv("PROCS_NS_CHILD") != "" {
		os.Stdout.WriteString(Self().String() + "\n")
		os.Stdin.Read(make([]byte, 1)) // until the parent closes stdin
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIDOfAnotherNamespace$")
	cmd.Env = append(os.Environ(), "PROCS_NS_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("no PID namespace here: %v", err)
	}
	defer cmd.Wait()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		t.Fatalf("the child said nothing: %v", err)
	}
	id, err := ParseID(line)
	if err != nil {
		t.Fatal(err)
	}
	if id.PID != 1 || id.NS == "" || id.NS == Self().NS {
		t.Fatalf("the child is %v, want 1 in a namespace of its own", id)
	}
	if got := id.Host(); got != cmd.Process.Pid || !id.Alive() {
		t.Fatalf("Host() = %d, alive %v; want %d, alive", got, id.Alive(), cmd.Process.Pid)
	}
	stdin.Close()
	cmd.Wait()
	if got := id.Host(); got != 0 || id.Alive() {
		t.Fatalf("gone, Host() = %d, alive %v; want 0, not alive", got, id.Alive())
	}
}

// A process's ID holds when it started: a later process given the same id
// is not taken for it.
func TestIDOfAnEndedProcess(t *testing.T) {
	self := Self()
	if self.Start == 0 || self.Host() != os.Getpid() {
		t.Fatalf("Self() = %v, Host() %d", self, self.Host())
	}
	later := self
	later.Start++
	if later.Host() != 0 || later.Alive() {
		t.Fatalf("a process started later under this id is taken for this one: %v", later)
	}
}
