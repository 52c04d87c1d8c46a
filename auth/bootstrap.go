package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-engine/baton"
)

// ErrBadHashFile marks a pre-provisioned admin key hash file that cannot be
// used: unreadable, not JSON, missing fields, or not an Argon2id PHC hash.
// The caller exits with status 2 for it and 1 for any other Bootstrap error.
var ErrBadHashFile = errors.New("malformed admin key hash file")

// Row names of bootstrapped admin keys.
const (
	BootstrapKeyName   = "bootstrap-admin"
	ProvisionedKeyName = "provisioned-admin"
)

// BootstrapOptions say where the admin key files are and what to do.
type BootstrapOptions struct {
	KeyFile  string // plaintext of a self-generated key is written here
	HashFile string // pre-provisioned {"key_hash","prefix","name"} JSON
	Rotate   bool   // revoke every admin key and generate a new one
	Disabled bool   // admin authentication is off: do nothing
	Logger   *slog.Logger

	// hash computes the stored hash of a generated key (HashAdmin when
	// nil); tests use cheap parameters.
	hash func(string) (string, error)
}

// hashFile is the JSON of BAE_ADMIN_KEY_HASH_FILE.
type hashFile struct {
	KeyHash *string         `json:"key_hash"`
	Prefix  *string         `json:"prefix"`
	Name    json.RawMessage `json:"name"` // absent: ProvisionedKeyName; null is an error
}

// Bootstrap makes sure the admin port has a credential, as BAE's admin API
// prescribes for every start (after migrations, before listening).
func Bootstrap(ctx context.Context, keys baton.KeyStore, opts BootstrapOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Disabled {
		if opts.Rotate {
			return errors.New("admin key rotation cannot be combined with disabled admin authentication")
		}
		log.Warn("admin API authentication is DISABLED")
		return nil
	}
	if opts.Rotate {
		if err := keys.RevokeAdminKeys(ctx); err != nil {
			return fmt.Errorf("revoke admin keys: %w", err)
		}
		if opts.KeyFile != "" {
			if err := os.Remove(opts.KeyFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete admin key file: %w", err)
			}
		}
		if err := generate(ctx, keys, opts); err != nil {
			return err
		}
		log.Info("admin key rotated", "path", opts.KeyFile)
		return nil
	}

	active, _, err := keys.ListKeys(ctx, baton.RoleAdmin, baton.Page{Limit: 1})
	if err != nil {
		return fmt.Errorf("list admin keys: %w", err)
	}
	if len(active) > 0 {
		return nil
	}

	if opts.HashFile != "" {
		data, err := os.ReadFile(opts.HashFile)
		switch {
		case err == nil:
			if err := ingest(ctx, keys, opts.HashFile, data); err != nil {
				return err
			}
			log.Info("admin key hash loaded from pre-provisioned file", "path", opts.HashFile)
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%w: %s: %v", ErrBadHashFile, opts.HashFile, unwrapPath(err))
		}
	}

	if err := generate(ctx, keys, opts); err != nil {
		return err
	}
	log.Info("no admin key found; generated new admin key, written to file", "path", opts.KeyFile)
	return nil
}

// ingest stores the hash of a pre-provisioned hash file verbatim.
func ingest(ctx context.Context, keys baton.KeyStore, path string, data []byte) error {
	var hf hashFile
	if err := json.Unmarshal(data, &hf); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadHashFile, path, err)
	}
	// As BAE: blank counts as empty, and a name, when present, is a string
	// kept as written ("" included).
	if hf.KeyHash == nil || strings.TrimSpace(*hf.KeyHash) == "" {
		return fmt.Errorf("%w: %s: key_hash is missing or empty", ErrBadHashFile, path)
	}
	if hf.Prefix == nil || strings.TrimSpace(*hf.Prefix) == "" {
		return fmt.Errorf("%w: %s: prefix is missing or empty", ErrBadHashFile, path)
	}
	name := ProvisionedKeyName
	if hf.Name != nil {
		if string(hf.Name) == "null" || json.Unmarshal(hf.Name, &name) != nil {
			return fmt.Errorf("%w: %s: name must be a string", ErrBadHashFile, path)
		}
	}
	if _, err := parsePHC(*hf.KeyHash); err != nil {
		return fmt.Errorf("%w: %s: key_hash is not an Argon2id PHC string: %v", ErrBadHashFile, path, err)
	}
	k := &baton.Key{
		ID:        baton.NewID(baton.PrefixKey),
		Name:      name,
		Hash:      *hf.KeyHash,
		Prefix:    *hf.Prefix,
		Role:      baton.RoleAdmin,
		CreatedAt: baton.Now(),
	}
	if err := keys.CreateKey(ctx, k); err != nil {
		return fmt.Errorf("store admin key: %w", err)
	}
	return nil
}

// generate creates a new admin key, writes its plaintext to the key file and
// stores its hash. The file is written first: if storing fails, the next
// start finds no admin row and overwrites the file, whereas a row whose
// plaintext was never written would lock the operator out.
func generate(ctx context.Context, keys baton.KeyStore, opts BootstrapOptions) error {
	if opts.KeyFile == "" {
		return errors.New("no admin key file configured to write the generated admin key to")
	}
	hash := opts.hash
	if hash == nil {
		hash = HashAdmin
	}
	plain := baton.NewSecret(baton.AdminKeyPrefix)
	phc, err := hash(plain)
	if err != nil {
		return fmt.Errorf("hash admin key: %w", err)
	}
	if err := writeKeyFile(opts.KeyFile, plain+"\n"); err != nil {
		return fmt.Errorf("write admin key file: %w", err)
	}
	k := &baton.Key{
		ID:        baton.NewID(baton.PrefixKey),
		Name:      BootstrapKeyName,
		Hash:      phc,
		Prefix:    plain[:8],
		Role:      baton.RoleAdmin,
		CreatedAt: baton.Now(),
	}
	if err := keys.CreateKey(ctx, k); err != nil {
		return fmt.Errorf("store admin key: %w", err)
	}
	return nil
}

// writeKeyFile replaces path with content, mode 0600 whatever the old file
// had, creating a missing parent directory with mode 0700. The content is
// written to a temporary file in the same directory and renamed into place,
// so a crash never leaves a half-written key.
func writeKeyFile(path, content string) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// unwrapPath drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
