// Package auth checks Baton's credentials: client and session keys on the
// client port, admin keys on the admin port, and the admin key bootstrap that
// runs at every start (spec-client §1, spec-admin §1).
//
// Client and session keys carry 192 random bits and are stored as SHA-256
// digests, so a request costs one hash, a map lookup and a constant-time
// compare once the key is cached; the store is asked only on a cache miss.
// Last-use times are collected in memory and written in one batch per
// flush interval. Admin keys keep BAE's Argon2id PHC hashes (so
// pre-provisioned hash files work); a verified admin token is remembered so
// the 64 MiB derivation runs once per token, not once per request.
package auth
