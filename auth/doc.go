// Package auth checks Baton's credentials: client and session keys on the
// client port, admin keys on the admin port, and the admin key bootstrap that
// runs at every start (BAE's client API, BAE's admin API).
//
// Client and session keys carry 192 random bits and are stored as SHA-256
// digests, so a request costs one hash, a map lookup and a constant-time
// compare once the key is cached; the store is asked only on a cache miss.
// Last-use times are collected in memory and written in one batch per
// flush interval; PendingUses shows those not written yet, so the admin
// key list is current. Admin keys keep BAE's Argon2id PHC hashes (so
// pre-provisioned hash files work); a verified admin token is remembered so
// the 64 MiB derivation runs once per token, not once per request.
// Verifications derive one at a time, and the memory of every Argon2id
// computation (verifying or hashing a new key) goes back to the
// operating system as soon as each is done, so an idle server does not
// keep 64 MiB of freed heap resident.
//
// ExecutorTokens exchanges executor credentials (bae_exc_…, stored as
// SHA-256 digests like client keys) for short-lived executor tokens
// (bae_ext_…): base64url JSON claims naming the scope, owner, credential
// and expiry, signed with HMAC-SHA256 under a per-installation key kept in
// the store, so that any node verifies them without a lookup of the token.
// Verify checks the MAC in constant time, the expiry and, through a short
// cache that RevokeCredential clears, that the credential is not revoked.
//
// TurnTokens signs the per-turn credentials of executor brains with the
// same key under their own prefixes (so no kind of token verifies as
// another): model tokens (bae_mdt_…) binding a session, a turn and the
// brain's machine, and tools tokens (bae_tlt_…) binding the binding epoch
// too. Both live an hour and are signed only while the engine says the
// turn is active.
package auth
