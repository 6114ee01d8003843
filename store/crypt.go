package store

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Encryption at rest: the on-disk format is in the package doc
// ("Encryption"). cryptFS is the file system layer that does it, under
// writerFS and readerFS, so that every file Pebble makes — tables, logs,
// the manifest, OPTIONS — is sealed as it is written and checked as it is
// read.

// KeySize is the length of an encryption key: AES-256.
const KeySize = 32

// KeyFileEnv names the environment variable that gives the key file when
// no --encrypt-key-file is given.
const KeyFileEnv = "TANDEM_ENCRYPT_KEY_FILE"

// Part of the format, never change.
const (
	cryptMagic    = "TANDEMcr"
	cryptVersion  = 1
	cryptAESGCM   = 1                         // cipher: AES-256-GCM
	cryptPage     = 4096                      // the header, and each block, on disk
	cryptNonce    = 12                        // GCM's standard nonce
	cryptTag      = 16                        // GCM's tag
	cryptOverhead = 2 + cryptNonce + cryptTag // length, nonce, tag
	cryptBlock    = cryptPage - cryptOverhead // plaintext bytes per block
	cryptSalt     = 32                        // per file: its key and key check derive from it
	cryptCheck    = 16                        // the key check value
	hdrSalt       = 16                        // the salt's offset in the header
	hdrCheck      = hdrSalt + cryptSalt       // the key check's
	cryptFileInfo = "tandem file key v1"      // HKDF info of a file's key
	cryptCheckTag = "tandem key check v1\x00" // HMAC prefix of the key check
	cryptCipher   = "AES-256-GCM"             // Meta.Encryption
)

var (
	// ErrNoKey: the store is encrypted and no key was given.
	ErrNoKey = errors.New("store: encrypted, and no key given")
	// ErrWrongKey: the store is encrypted with another key than the one given.
	ErrWrongKey = errors.New("store: wrong key")
)

// Key is an encryption key for captures, run directories and the feed
// copies of shadows. It never prints (String, GoString and LogValue say
// "redacted"); MarshalBinary hands it to a shadow's worker over its
// control socket, and nothing else.
type Key struct{ b [KeySize]byte }

// ParseKey reads a key: exactly 32 bytes, or 64 hexadecimal digits with
// an optional trailing newline. An error never quotes the key.
func ParseKey(b []byte) (*Key, error) {
	var k Key
	if len(b) == KeySize {
		copy(k.b[:], b)
	} else {
		s := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(s) != 2*KeySize {
			return nil, fmt.Errorf("a key is %d raw bytes or %d hex digits (for one: openssl rand -hex %d), not %d bytes", KeySize, 2*KeySize, KeySize, len(b))
		}
		if _, err := hex.Decode(k.b[:], s); err != nil {
			return nil, fmt.Errorf("a key of %d characters must be hex digits only (for one: openssl rand -hex %d)", 2*KeySize, KeySize)
		}
	}
	if k.b == ([KeySize]byte{}) {
		return nil, errors.New("the key is all zeros")
	}
	return &k, nil
}

// LoadKeyFile reads a key (ParseKey) from a file that only its owner can
// read.
func LoadKeyFile(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s can be read by others than its owner (mode %04o); make it private: chmod 600 %s", path, perm, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4*KeySize))
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	k, err := ParseKey(b)
	clear(b)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %v", path, err)
	}
	return k, nil
}

func (Key) String() string       { return "store.Key(redacted)" }
func (Key) GoString() string     { return "store.Key(redacted)" }
func (Key) LogValue() slog.Value { return slog.StringValue("redacted") }

// MarshalBinary and UnmarshalBinary carry the key to a shadow's worker
// (gob, over its control socket).
func (k *Key) MarshalBinary() ([]byte, error) { return bytes.Clone(k.b[:]), nil }

func (k *Key) UnmarshalBinary(b []byte) error {
	if len(b) != KeySize {
		return fmt.Errorf("store: a key of %d bytes", len(b))
	}
	copy(k.b[:], b)
	return nil
}

// check is the key check value of a file with this salt: it tells the
// right key from another without revealing either.
func (k *Key) check(salt []byte) []byte {
	mac := hmac.New(sha256.New, k.b[:])
	mac.Write([]byte(cryptCheckTag))
	mac.Write(salt)
	return mac.Sum(nil)[:cryptCheck]
}

// aead is the cipher of a file with this salt: its own AES-256 key,
// derived from the key and the salt (HKDF-SHA256).
func (k *Key) aead(salt []byte) (cipher.AEAD, error) {
	fk, err := hkdf.Key(sha256.New, k.b[:], salt, cryptFileInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(fk)
	clear(fk)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Option is an option of Open, OpenRun, CreateRun, Seal, Pack and Unpack.
type Option func(*options)

type options struct {
	key       *Key
	cacheSize int64
	// runMinFree: a run directory's free-space floor (WithRunMinFree).
	runMinFree *int64
}

// WithRunMinFree sets a new run directory's free-space floor (default
// DefaultRunMinFree; 0: none).
func WithRunMinFree(bytes int64) Option { return func(o *options) { o.runMinFree = &bytes } }

// WithKey gives the key of an encrypted store (a new run directory is
// encrypted with it). A store that is not encrypted opens as it is: the
// key is for those that are.
func WithKey(k *Key) Option { return func(o *options) { o.key = k } }

// WithCacheSize gives a capture reader (Open) a block cache of n bytes
// instead of Pebble's 8 MiB default: for a reader that reads the capture
// once, in order, where blocks are not read again.
func WithCacheSize(n int64) Option { return func(o *options) { o.cacheSize = n } }

func optionsOf(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// storeKey says which key opens the store in dir: nil for a store in
// clear, key for an encrypted one, an error (ErrNoKey, ErrWrongKey) when
// key cannot open it. It reads the header of one of Pebble's files.
func storeKey(dir string, key *Key) (*Key, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !(strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "MANIFEST-") || strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".log")) {
			continue
		}
		var hdr [cryptPage]byte
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		_, err = io.ReadFull(f, hdr[:])
		f.Close()
		if err != nil {
			continue // too short to tell: a log cut short, an empty file
		}
		if string(hdr[:len(cryptMagic)]) != cryptMagic {
			return nil, nil
		}
		switch {
		case key == nil:
			return nil, fmt.Errorf("%w: %s is encrypted; give the key it was written with (--encrypt-key-file FILE, or %s=FILE)", ErrNoKey, dir, KeyFileEnv)
		case !hmac.Equal(key.check(hdr[hdrSalt:hdrSalt+cryptSalt]), hdr[hdrCheck:hdrCheck+cryptCheck]):
			return nil, fmt.Errorf("%w: %s is encrypted with another key than the one given", ErrWrongKey, dir)
		}
		return key, nil
	}
	return nil, nil
}

// Encrypted says whether the store (a capture or a run directory) in dir
// is encrypted, without a key.
func Encrypted(dir string) (bool, error) {
	_, err := storeKey(dir, nil)
	if errors.Is(err, ErrNoKey) {
		return true, nil
	}
	return false, err
}

// cryptFS seals every file it writes and opens every file it reads
// (package doc, "Encryption"). LOCK files (Lock) and directories pass
// through.
type cryptFS struct {
	vfs.FS
	key *Key
}

// encryptFS is fs, encrypting with key if it is not nil.
func encryptFS(fs vfs.FS, key *Key) vfs.FS {
	if key == nil {
		return fs
	}
	return cryptFS{FS: fs, key: key}
}

func (c cryptFS) Unwrap() vfs.FS { return c.FS }

func (c cryptFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	cf, err := c.newFile(name, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return cf, nil
}

// ReuseForWrite does not reuse: a recycled log's blocks are sealed with
// its old file key, and would read as damage where Pebble expects a stale
// tail. The old file is removed and a new one made, which the contract
// of ReuseForWrite allows.
func (c cryptFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if err := c.FS.Remove(oldname); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return c.Create(newname, cat)
}

func (c cryptFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name, cat, opts...)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	var cf *cryptFile
	switch {
	case err != nil:
	case fi.Size() == 0:
		cf, err = c.newFile(name, f)
	default:
		cf, err = c.openFile(name, f, fi.Size(), true)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return cf, nil
}

func (c cryptFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	var cf *cryptFile
	if err == nil {
		cf, err = c.openFile(name, f, fi.Size(), false)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return cf, nil
}

// Stat gives a file's plaintext size.
func (c cryptFS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := c.FS.Stat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return fi, err
	}
	f, err := c.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// newFile writes a new file's header into f, which is empty.
func (c cryptFS) newFile(name string, f vfs.File) (*cryptFile, error) {
	var hdr [cryptPage]byte
	copy(hdr[:], cryptMagic)
	hdr[8], hdr[9] = cryptVersion, cryptAESGCM
	binary.LittleEndian.PutUint32(hdr[12:16], cryptPage)
	salt := hdr[hdrSalt : hdrSalt+cryptSalt]
	rand.Read(salt)
	copy(hdr[hdrCheck:hdrCheck+cryptCheck], c.key.check(salt))
	aead, err := c.key.aead(salt)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(hdr[:], 0); err != nil {
		return nil, err
	}
	return &cryptFile{File: f, name: filepath.Base(name), aead: aead}, nil
}

// openFile opens an existing file of physical size phys; forWrite loads
// its partial last block to append to.
func (c cryptFS) openFile(name string, f vfs.File, phys int64, forWrite bool) (*cryptFile, error) {
	base := filepath.Base(name)
	cf := &cryptFile{File: f, name: base}
	if phys == 0 {
		// Made, and not yet headed, when its writer stopped: empty.
		if forWrite {
			return c.newFile(name, f)
		}
		return cf, nil
	}
	var hdr [cryptPage]byte
	if n, err := f.ReadAt(hdr[:], 0); n < len(hdr) {
		if err == nil || err == io.EOF {
			err = errors.New("a header cut short")
		}
		return nil, cryptCorrupt(base, err)
	}
	switch {
	case string(hdr[:len(cryptMagic)]) != cryptMagic:
		return nil, cryptCorrupt(base, errors.New("the file is not encrypted, in an encrypted store"))
	case hdr[8] != cryptVersion || hdr[9] != cryptAESGCM || binary.LittleEndian.Uint32(hdr[12:16]) != cryptPage:
		return nil, fmt.Errorf("%w: %s is encrypted in format %d, cipher %d; this tandem reads format %d: upgrade tandem to read it", ErrNewerFormat, base, hdr[8], hdr[9], cryptVersion)
	case !hmac.Equal(c.key.check(hdr[hdrSalt:hdrSalt+cryptSalt]), hdr[hdrCheck:hdrCheck+cryptCheck]):
		return nil, fmt.Errorf("%w: %s is encrypted with another key than the one given", ErrWrongKey, base)
	}
	aead, err := c.key.aead(hdr[hdrSalt : hdrSalt+cryptSalt])
	if err != nil {
		return nil, err
	}
	cf.aead = aead
	// The plaintext size: full blocks, and the last one's length. A last
	// block cut short or with no valid length (a write torn by a crash)
	// is not counted: the file ends before it, as a log's torn tail does.
	blocks := (phys - cryptPage + cryptPage - 1) / cryptPage
	size := int64(0)
	if blocks > 0 {
		size = (blocks - 1) * cryptBlock
		var l [2]byte
		last := int64(cryptPage) * blocks
		if _, err := f.ReadAt(l[:], last); err == nil {
			n := int64(binary.LittleEndian.Uint16(l[:]))
			if n > 0 && n <= cryptBlock && last+cryptOverhead+n <= phys {
				size += n
			}
		}
	}
	cf.size.Store(size)
	if forWrite && size%cryptBlock != 0 {
		b := size / cryptBlock
		page := make([]byte, cryptPage)
		pt, err := cf.readBlock(b, page)
		if err != nil {
			// Its last block does not open: written over from its start.
			cf.size.Store(b * cryptBlock)
		} else {
			cf.mu.tail = append(cf.mu.tail[:0], pt...)
		}
	}
	return cf, nil
}

// cryptFile is one encrypted file. Its ReadAt is safe for concurrent use
// (Pebble reads tables from many iterators at once); writes are
// serialized.
type cryptFile struct {
	vfs.File // the file on disk
	name     string
	aead     cipher.AEAD
	size     atomic.Int64 // the plaintext size
	rpos     int64        // Read's offset (Read is sequential, one caller)
	mu       struct {
		sync.Mutex
		tail []byte // the plaintext of a partial last block, to append to
	}
}

// blockError is a block that did not open: changed on disk, or torn.
type blockError struct {
	block int64
	why   string
}

func (e *blockError) Error() string {
	return fmt.Sprintf("encrypted block %d %s", e.block, e.why)
}

// cryptDamage is damage found in file name: an error Pebble
// (pebble.IsCorruptionError) and so this package (ErrCorrupt, damaged)
// take for a corruption.
type cryptDamage struct {
	name string
	err  error
}

func (e *cryptDamage) Error() string        { return e.name + ": " + e.err.Error() }
func (e *cryptDamage) Unwrap() error        { return e.err }
func (e *cryptDamage) Is(target error) bool { return target == pebble.ErrCorruption }

func cryptCorrupt(name string, err error) error { return &cryptDamage{name, err} }

var pagePool = sync.Pool{New: func() any { b := make([]byte, 0, 16*cryptPage); return &b }}

func getPages(n int) *[]byte {
	bp := pagePool.Get().(*[]byte)
	if cap(*bp) < n*cryptPage {
		*bp = make([]byte, n*cryptPage)
	}
	*bp = (*bp)[:n*cryptPage]
	return bp
}

func putPages(bp *[]byte) {
	clear(*bp) // it held plaintext
	pagePool.Put(bp)
}

// blockAD is a block's additional data: its index, so that no block can
// be moved within its file (a file's key is its own: none can move to
// another), and its length.
func blockAD(dst *[10]byte, b int64, n int) []byte {
	binary.LittleEndian.PutUint64(dst[:8], uint64(b))
	binary.LittleEndian.PutUint16(dst[8:], uint16(n))
	return dst[:]
}

// openPage authenticates and decrypts block b, in place in page, and
// returns its plaintext.
func (f *cryptFile) openPage(b int64, page []byte) ([]byte, error) {
	return f.openPageTo(b, page, nil)
}

// openPageTo is openPage decrypting into dst's spare capacity instead
// (dst nil: in place), when the caller's buffer takes the whole block:
// the plaintext is then never in a pooled page (no copy, nothing to
// clear).
func (f *cryptFile) openPageTo(b int64, page, dst []byte) ([]byte, error) {
	n := int(binary.LittleEndian.Uint16(page[0:2]))
	if n == 0 || n > cryptBlock {
		return nil, &blockError{b, fmt.Sprintf("has no valid length (%d)", n)}
	}
	var ad [10]byte
	ct := page[2+cryptNonce : 2+cryptNonce+n+cryptTag]
	if dst == nil {
		dst = ct[:0]
	}
	pt, err := f.aead.Open(dst, page[2:2+cryptNonce], ct, blockAD(&ad, b, n))
	if err != nil {
		return nil, &blockError{b, "fails authentication (a byte changed on disk, or a write torn by a crash)"}
	}
	if want := min(f.size.Load()-b*cryptBlock, cryptBlock); int64(n) != want {
		return nil, &blockError{b, fmt.Sprintf("holds %d bytes where the file's size says %d", n, want)}
	}
	return pt, nil
}

// readBlock reads and opens block b into page.
func (f *cryptFile) readBlock(b int64, page []byte) ([]byte, error) {
	if _, err := f.File.ReadAt(page[:cryptPage], cryptPage*(b+1)); err != nil && err != io.EOF {
		return nil, err
	}
	return f.openPage(b, page)
}

func (f *cryptFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.readAt(p, off)
	var be *blockError
	if errors.As(err, &be) {
		err = cryptCorrupt(f.name, err)
	}
	return n, err
}

func (f *cryptFile) readAt(p []byte, off int64) (int, error) {
	size := f.size.Load()
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), size)
	first, last := off/cryptBlock, (end-1)/cryptBlock
	bp := getPages(int(last - first + 1))
	pages := *bp
	// Only the pages decrypted in place hold plaintext: those are
	// cleared before the pages go back to the pool.
	clearFrom, clearTo := len(pages), 0
	defer func() {
		if clearFrom < clearTo {
			clear(pages[clearFrom:clearTo])
		}
		pagePool.Put(bp)
	}()
	if n, err := f.File.ReadAt(pages, cryptPage*(first+1)); err != nil && !(err == io.EOF && n > 0) {
		if err == io.EOF {
			err = &blockError{first, "is missing (the file is cut short)"}
		}
		return 0, err
	}
	n := 0
	for b := first; b <= last; b++ {
		at := int((b - first) * cryptPage)
		page := pages[at : at+cryptPage]
		lo := int64(0)
		if b == first {
			lo = off - b*cryptBlock
		}
		if lo == 0 && len(p)-n >= cryptBlock {
			// The whole block goes to p: decrypt it there.
			pt, err := f.openPageTo(b, page, p[n:n])
			if err != nil {
				return n, err
			}
			n += len(pt)
			continue
		}
		pt, err := f.openPage(b, page)
		clearFrom, clearTo = min(clearFrom, at), max(clearTo, at+cryptPage)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], pt[lo:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read reads on from the last Read. A last block that does not open is
// the file's end: a log whose last write was torn by a crash ends where
// the write began, as Pebble reads a torn tail in clear. Any other block
// that does not open is damage.
func (f *cryptFile) Read(p []byte) (int, error) {
	n, err := f.readAt(p, f.rpos)
	f.rpos += int64(n)
	var be *blockError
	if errors.As(err, &be) {
		if be.block == (f.size.Load()-1)/cryptBlock {
			f.rpos = f.size.Load()
			if n > 0 {
				return n, nil
			}
			return 0, io.EOF
		}
		err = cryptCorrupt(f.name, err)
	}
	return n, err
}

func (f *cryptFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeAtLocked(p, f.size.Load())
}

func (f *cryptFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeAtLocked(p, off)
}

// writeAtLocked seals the blocks p touches, with what they held, and
// writes them in one call. Each block gets a new random nonce each time
// it is written; a partial last block is written again as it grows.
func (f *cryptFile) writeAtLocked(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	size := f.size.Load()
	if off > size { // a hole reads as zeros
		if _, err := f.writeAtLocked(make([]byte, off-size), size); err != nil {
			return 0, err
		}
		size = off
	}
	end := off + int64(len(p))
	newSize := max(size, end)
	first, last := off/cryptBlock, (end-1)/cryptBlock
	count := int(last - first + 1)
	bp := getPages(count)
	defer putPages(bp)
	pages := *bp
	nonces := make([]byte, cryptNonce*count)
	rand.Read(nonces)
	var ad [10]byte
	for i := range count {
		b := first + int64(i)
		page := pages[i*cryptPage : (i+1)*cryptPage]
		lo, hi := b*cryptBlock, min((b+1)*cryptBlock, newSize)
		n := int(hi - lo)
		pt := page[2+cryptNonce : 2+cryptNonce+n]
		// What the block held, where p does not cover it.
		if lo < size && (lo < off || min(hi, size) > end) {
			switch {
			case b == size/cryptBlock && size%cryptBlock != 0:
				copy(pt, f.mu.tail)
			default:
				scratch := make([]byte, cryptPage)
				old, err := f.readBlock(b, scratch)
				if err != nil {
					return 0, cryptCorrupt(f.name, err)
				}
				copy(pt, old)
			}
		}
		from := max(lo, off)
		copy(pt[from-lo:], p[from-off:min(hi, end)-off])
		if b == last && n < cryptBlock && hi == newSize {
			f.mu.tail = append(f.mu.tail[:0], pt...)
		}
		binary.LittleEndian.PutUint16(page[0:2], uint16(n))
		copy(page[2:2+cryptNonce], nonces[i*cryptNonce:])
		f.aead.Seal(pt[:0], page[2:2+cryptNonce], pt, blockAD(&ad, b, n))
	}
	if _, err := f.File.WriteAt(pages, cryptPage*(first+1)); err != nil {
		return 0, err
	}
	if newSize%cryptBlock == 0 {
		clear(f.mu.tail)
		f.mu.tail = f.mu.tail[:0]
	}
	f.size.Store(newSize)
	return len(p), nil
}

// physical is where plaintext offset off ends on disk: the end of its
// block.
func physical(off int64) int64 {
	if off <= 0 {
		return cryptPage
	}
	return cryptPage * ((off-1)/cryptBlock + 2)
}

func (f *cryptFile) SyncTo(length int64) (bool, error) { return f.File.SyncTo(physical(length)) }

func (f *cryptFile) Preallocate(off, length int64) error {
	start := cryptPage * (off/cryptBlock + 1)
	return f.File.Preallocate(start, physical(off+length)-start)
}

func (f *cryptFile) Prefetch(off, length int64) error {
	start := cryptPage * (off/cryptBlock + 1)
	return f.File.Prefetch(start, physical(off+length)-start)
}

func (f *cryptFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return sizedInfo{fi, f.size.Load()}, nil
}

func (f *cryptFile) Close() error {
	f.mu.Lock()
	clear(f.mu.tail)
	f.mu.Unlock()
	return f.File.Close()
}

// sizedInfo is a file's info with its plaintext size.
type sizedInfo struct {
	vfs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }
