package phase

import (
	"bytes"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// streams are the two output pipes of a call: the child writes into one
// end, peal drains the other to the end, keeping the first MaxCapture bytes
// of each, feeding sinks, the idle watchdog and the Watcher.
type streams struct {
	outR, errR         *os.File // peal's read ends
	childOut, childErr *os.File // the child's write ends, closed in peal once it has started
	stdout, stderr     *capture
	done               chan struct{} // closed when both streams reached EOF (or were closed)

	start    time.Time
	lastSeen atomic.Int64 // time of the latest output, as nanoseconds since start
	// chunks counts the reads handled, busy the ones being handled now: a
	// reader still working through what is in the pipes is not cut off.
	chunks atomic.Int64
	busy   atomic.Int32
	// reading counts the drains not ended yet.
	reading atomic.Int32
}

func newStreams(spec Spec) (*streams, error) {
	s := &streams{stdout: &capture{sink: spec.StdoutSink}, stderr: &capture{sink: spec.StderrSink}, done: make(chan struct{})}
	var err error
	if s.outR, s.childOut, err = pipe(true); err != nil {
		return nil, err
	}
	if s.errR, s.childErr, err = pipe(true); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

// closeChildEnds drops peal's copies of the child's ends, so that EOF comes
// when the last process holding them is gone.
func (s *streams) closeChildEnds() {
	s.childOut.Close()
	s.childErr.Close()
}

// read starts draining both streams; w, when set, gets every line.
func (s *streams) read(start time.Time, w Watcher) {
	s.start = start
	var lines *lineFeed
	if w != nil {
		lines = &lineFeed{w: w}
	}
	s.reading.Store(2)
	go s.drain(s.outR, s.stdout, lines.splitter(Stdout))
	go s.drain(s.errR, s.stderr, lines.splitter(Stderr))
}

// readBufs holds the read buffers of finished drains: a call that prints
// nothing then costs no 64 KiB allocation per stream (and no garbage).
var readBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

func (s *streams) drain(r *os.File, c *capture, lines *splitter) {
	defer func() {
		if s.reading.Add(-1) == 0 {
			close(s.done) // the last one to end
		}
	}()
	// Nothing keeps a slice of buf once a chunk is handled: the capture
	// and the line splitter copy what they keep.
	arr := readBufs.Get().(*[64 << 10]byte)
	defer readBufs.Put(arr)
	buf := arr[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.busy.Add(1)
			c.write(buf[:n])
			s.lastSeen.Store(int64(time.Since(s.start)))
			lines.write(buf[:n])
			s.chunks.Add(1)
			s.busy.Add(-1)
		}
		if err != nil {
			lines.flush()
			return
		}
	}
}

// silentFor is how long the call has written nothing on either stream.
func (s *streams) silentFor() time.Duration {
	return time.Since(s.start) - time.Duration(s.lastSeen.Load())
}

// stop waits for both streams to reach EOF once the call's processes are
// gone, and stops reading when nothing is coming any more: after a grace
// (nothing after a hard stop) in which no output was read, a process outside
// the group may hold a pipe and is not waited for. A reader still working
// through what the pipes hold is not cut off, up to maxDrain.
func (s *streams) stop(grace time.Duration, hard <-chan struct{}) {
	deadline := time.Now().Add(grace + maxDrain)
	for {
		before := s.chunks.Load()
		select {
		case <-s.done:
			return
		case <-hard:
		case <-time.After(grace):
			if (s.busy.Load() > 0 || s.chunks.Load() != before) && time.Now().Before(deadline) {
				continue
			}
		}
		s.outR.Close()
		s.errR.Close()
		<-s.done
		return
	}
}

// maxDrain bounds how long reading may go on after the grace while output
// keeps coming from a process peal could not stop.
const maxDrain = time.Minute

func (s *streams) closeAll() {
	for _, f := range []*os.File{s.outR, s.errR, s.childOut, s.childErr} {
		if f != nil {
			f.Close()
		}
	}
}

// capture keeps the first MaxCapture bytes of a stream and counts the rest.
type capture struct {
	mu      sync.Mutex
	kept    []byte
	dropped int64
	sink    io.Writer
	sinkErr error
}

func (c *capture) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink != nil && c.sinkErr == nil {
		_, c.sinkErr = c.sink.Write(p)
	}
	room := MaxCapture - len(c.kept)
	if room >= len(p) {
		c.kept = append(c.kept, p...)
		return
	}
	if room > 0 {
		c.kept = append(c.kept, p[:room]...)
	}
	c.dropped += int64(len(p) - max(room, 0))
}

func (c *capture) result() (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.kept), c.dropped
}

// maxLine bounds the memory a Watcher's line can take: a longer line is
// handed over in pieces of this size.
const maxLine = 1 << 20

// lineFeed hands the lines of both streams to one Watcher, one at a time.
type lineFeed struct {
	mu sync.Mutex
	w  Watcher
}

func (f *lineFeed) splitter(s Stream) *splitter {
	if f == nil {
		return nil
	}
	return &splitter{feed: f, stream: s}
}

// splitter cuts one stream into lines.
type splitter struct {
	feed    *lineFeed
	stream  Stream
	partial []byte
}

func (sp *splitter) write(p []byte) {
	if sp == nil {
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			sp.partial = append(sp.partial, p...)
			if len(sp.partial) >= maxLine {
				sp.emit()
			}
			return
		}
		sp.partial = append(sp.partial, p[:i]...)
		sp.emit()
		p = p[i+1:]
	}
}

// flush hands over a last line without a newline.
func (sp *splitter) flush() {
	if sp != nil && len(sp.partial) > 0 {
		sp.emit()
	}
}

func (sp *splitter) emit() {
	line := bytes.TrimSuffix(sp.partial, []byte{'\r'})
	sp.feed.mu.Lock()
	sp.feed.w.Line(sp.stream, line)
	sp.feed.mu.Unlock()
	sp.partial = sp.partial[:0]
}
