package tiers

import (
	"io"
	"os"
)

// FS is the file system an SSD tier keeps its slot files in: the seam
// through which tests inject write errors, a full disk or a failing sync.
// OSFS is the real one. Names are full paths.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// ReadDir lists a directory like os.ReadDir.
	ReadDir(dir string) ([]os.DirEntry, error)
	// MkdirAll creates a directory and its parents like os.MkdirAll.
	MkdirAll(dir string, perm os.FileMode) error
	// Rename renames a file like os.Rename (atomically within dir).
	Rename(oldName, newName string) error
	// Remove removes a file like os.Remove.
	Remove(name string) error
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable: fsync of the directory.
	SyncDir(dir string) error
}

// File is one open slot file.
type File interface {
	io.ReaderAt // pread
	io.WriterAt // pwrite
	// Sync makes the file's written data durable: fdatasync(2) where the
	// system has it, fsync otherwise.
	Sync() error
	// Fallocate reserves disk blocks for [off, off+n) and extends the file
	// to cover them, so that later writes there cannot fail for lack of
	// space: fallocate(2) with mode 0. Where the system or file system
	// cannot, it returns an error wrapping errors.ErrUnsupported and the
	// caller falls back to Truncate.
	Fallocate(off, n int64) error
	// Truncate sets the file's length like os.File.Truncate.
	Truncate(size int64) error
	// Stat describes the file like os.File.Stat.
	Stat() (os.FileInfo, error)
	io.Closer
}

// OSFS returns the operating system's file system.
func OSFS() FS { return osFS{} }

// osFS is FS over package os.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Rename(oldName, newName string) error        { return os.Rename(oldName, newName) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile is File over *os.File; Sync and Fallocate are per system
// (ssd_fs_linux.go, ssd_fs_other.go).
type osFile struct{ *os.File }

// ssdDontNeeder is implemented by files that can tell the kernel a byte range
// will not be read again soon (posix_fadvise DONTNEED), so that recovery's
// one pass over every payload does not push the rest of the page cache out.
type ssdDontNeeder interface {
	dontNeed(off, n int64)
}
