//go:build unix

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSpecialConfigFiles: a named pipe or a link to /dev/zero as the config
// file or as ticketflow's settings.json is refused at once with one line,
// where reading it would wait forever or fill memory.
func TestSpecialConfigFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.toml")
	os.Symlink("/dev/zero", zero)
	for path, want := range map[string]string{
		fifo: "config file " + fifo + ": it is a named pipe (FIFO), not a regular file",
		zero: "config file " + zero + ": it is a character device, not a regular file",
	} {
		_, err := Load(Inputs{ConfigPath: path})
		if err == nil || err.Error() != want {
			t.Errorf("config %s: %v, want %q", path, err, want)
		}
	}

	repo := gitRepo(t)
	settings := filepath.Join(repo, tfSettingsPath)
	os.MkdirAll(filepath.Dir(settings), 0o755)
	if err := unix.Mkfifo(settings, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(Inputs{Env: []string{"PEAL_REPO_PATH=" + repo}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "ignoring ticketflow settings "+settings+": it is a named pipe (FIFO)") {
		t.Errorf("warnings %q", cfg.Warnings)
	}
}
