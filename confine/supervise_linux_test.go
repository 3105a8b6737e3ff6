package confine

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A thread that does not lead its process is given its process's pidfd:
// what a connect() of a program's other threads needs before Linux 6.9.
func TestProcessPidfd(t *testing.T) {
	tids := make(chan int)
	done := make(chan struct{})
	defer close(done)
	go func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		<-done
	}()
	tid := <-tids
	for _, open := range []func(int) (int, error){openPidfd, processPidfd} {
		pidfd, err := open(tid)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unix.PidfdGetfd(pidfd, int(f.Fd()), 0)
		if err != nil {
			t.Fatalf("pidfd_getfd: %v", err)
		}
		if link, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(got)); link != os.DevNull {
			t.Errorf("the file taken is %s", link)
		}
		unix.Close(got)
		unix.Close(pidfd)
		f.Close()
	}
}
