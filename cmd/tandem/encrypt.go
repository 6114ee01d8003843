package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/tandemdb/tandem/store"
)

// keyFlag is --encrypt-key-file, which every command that writes or reads
// a capture, a run directory or a packed capture takes: one key, from the
// flag or else from $TANDEM_ENCRYPT_KEY_FILE, loaded once per command.
type keyFlag struct{ file string }

// add registers --encrypt-key-file on f; what says what the key does for
// this command.
func (k *keyFlag) add(f *pflag.FlagSet, what string) {
	f.StringVar(&k.file, "encrypt-key-file", "", what+": the key is in this `FILE` (32 bytes, or 64 hex digits: umask 077; openssl rand -hex 32 > FILE); default $"+store.KeyFileEnv+". AES-256-GCM, authenticated: a changed byte is found, never read as data")
}

// load returns the key, or nil when neither the flag nor the environment
// names a file. The key never appears in a message.
func (k *keyFlag) load() (*store.Key, error) {
	file, from := k.file, "--encrypt-key-file"
	if file == "" {
		file, from = os.Getenv(store.KeyFileEnv), "$"+store.KeyFileEnv
	}
	if file == "" {
		return nil, nil
	}
	key, err := store.LoadKeyFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", from, err)
	}
	return key, nil
}

// Help texts of --encrypt-key-file.
const (
	keyReadHelp  = "open an encrypted capture or packed capture (one in clear opens without it)"
	keyWriteHelp = "encrypt the capture at rest, and the shadows' copies of it and their run directories"
	keyRunHelp   = "open an encrypted capture, and encrypt the run directory"
	keyRunsHelp  = "open encrypted run directories"
)
