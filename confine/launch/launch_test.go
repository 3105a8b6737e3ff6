package launch

import (
	"reflect"
	"testing"
)

func TestConfigRoundTrip(t *testing.T) {
	for _, c := range []Config{
		{Control: 3, Flags: Init | Network | Landlock | Seccomp | Supervise, Extra: 0, Ports: []uint16{8080, 1}, Program: "/usr/bin/env"},
		{Control: 5, Flags: Subreaper, Extra: 2, Program: "/odd,path:with,commas"},
		{Control: 3, Flags: Probe | Network},
	} {
		got, err := Parse(c.Encode())
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("Parse(Encode(%+v)) = %+v, %v (%q)", c, got, err, c.Encode())
		}
	}
	for _, bad := range []string{"", "x", "3,1,0,,", "3,1,0,99999,/p", "a,1,0,,/p", "3,1,-1,,/p", "3,4294967296,0,,/p", "3,1,0,0,/p"} {
		if c, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v", bad, c)
		}
	}
}

func TestFilterAssembles(t *testing.T) {
	for _, flags := range []uint32{0, Supervise, Supervise | Network | IPC, Network | IPC} {
		prog, err := Filter(flags)
		if !seccompReady {
			if err == nil {
				t.Fatal("a filter for an architecture it does not know")
			}
			return
		}
		if err != nil || len(prog) < 20 || len(prog) > bpfMaxInsns {
			t.Fatalf("Filter(%#x): %d instructions, %v", flags, len(prog), err)
		}
		last := prog[len(prog)-1]
		if last.Code != bpfRetK {
			t.Errorf("the filter does not end with a return: %+v", last)
		}
	}
	var a asm
	a.jeq(1, "nowhere", "")
	if _, err := a.assemble(); err == nil {
		t.Error("a jump to a missing label assembled")
	}
}
