package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
)

// In cluster mode every committed batch rings a doorbell: one pg_notify
// (more when the payload would pass PostgreSQL's 8000-byte limit) sent in
// the batch's own transaction, so it is delivered if and only if the
// batch committed. The payload names the node and each session's last
// committed seq; a Listener on every other node decodes it. The log stays
// the truth: a node that missed notices rereads it.
//
// A payload is text lines: "baton1 <node>", then "<session> <seq>" for
// each session, or "baton1 <node> resync" alone, which asks every
// listener to reread whatever it follows, or "baton1 <node> end
// <session>" alone: the session's owner dropped it (closed or in error),
// or "baton1 <node> unsubscribe
// <session>" alone: a client ended the session's subscriptions
// (session.unsubscribe), which live on every node, or "baton1 <node>
// forget <id>" alone: a revoked key or a changed profile, which every
// node drops from its caches at once.

// notifyPrefix starts every payload; its digit is the format's version.
const notifyPrefix = "baton1 "

// maxNotifyBytes keeps each payload under PostgreSQL's limit (8000 bytes,
// terminator included).
const maxNotifyBytes = 7900

// Notice is one decoded doorbell.
type Notice struct {
	// Node is the node that committed.
	Node string
	// Seqs maps each session the batch appended to onto its last
	// committed seq.
	Seqs map[string]int64
	// Resync means the listener may have missed notices (it reconnected,
	// or a sender gave up on detail): every followed session must be
	// reread from its log.
	Resync bool
	// Unsubscribe names a session whose subscriptions must end on every
	// node.
	Unsubscribe string
	// Forget names a revoked key or a changed profile that every node
	// drops from its caches.
	Forget string
	// Ended names a session whose runtime its owner dropped (closed, or
	// ended in state error): every node ends its subscriptions.
	Ended string
}

// notifyChannel is the channel of the nodes sharing schema: nodes of
// different schemas in one database are different Batons.
func notifyChannel(schema string) string {
	ch := "baton_events"
	if schema != "" && schema != "public" {
		ch += "_" + schema
	}
	if len(ch) > 63 { // NAMEDATALEN - 1
		h := fnv.New64a()
		h.Write([]byte(schema))
		ch = "baton_events_" + strconv.FormatUint(h.Sum64(), 16)
	}
	return ch
}

// validName reports whether s can stand in a payload as a node or session
// name.
func validName(s string) bool {
	return s != "" && len(s) <= 200 && !strings.ContainsAny(s, " \t\r\n")
}

// encodeNotices returns the payloads announcing seqs (session → last
// seq) from node, each under maxNotifyBytes, sessions in name order. A
// session whose name cannot be carried turns the whole announcement into
// one resync payload.
func encodeNotices(node string, seqs map[string]int64) []string {
	ids := make([]string, 0, len(seqs))
	for id := range seqs {
		if !validName(id) {
			return []string{notifyPrefix + node + " resync"}
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	head := notifyPrefix + node
	var out []string
	var b strings.Builder
	for _, id := range ids {
		line := "\n" + id + " " + strconv.FormatInt(seqs[id], 10)
		if b.Len() > 0 && b.Len()+len(line) > maxNotifyBytes {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(head)
		}
		b.WriteString(line)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// DecodeNotice parses a doorbell payload.
func DecodeNotice(payload string) (Notice, error) {
	rest, ok := strings.CutPrefix(payload, notifyPrefix)
	if !ok {
		return Notice{}, errors.New("store: notice: unknown format")
	}
	head, body, _ := strings.Cut(rest, "\n")
	for _, verb := range []string{notifyUnsubscribe, notifyForget, notifyEnded} {
		if node, arg, ok := strings.Cut(head, " "+verb+" "); ok {
			if !validName(node) || !validName(arg) || body != "" {
				return Notice{}, fmt.Errorf("store: notice: bad %s", verb)
			}
			n := Notice{Node: node}
			switch verb {
			case notifyUnsubscribe:
				n.Unsubscribe = arg
			case notifyForget:
				n.Forget = arg
			default:
				n.Ended = arg
			}
			return n, nil
		}
	}
	node, resync := strings.CutSuffix(head, " resync")
	if !validName(node) {
		return Notice{}, errors.New("store: notice: bad node name")
	}
	if resync {
		if body != "" {
			return Notice{}, errors.New("store: notice: resync with sessions")
		}
		return Notice{Node: node, Resync: true}, nil
	}
	n := Notice{Node: node, Seqs: make(map[string]int64)}
	for line := range strings.SplitSeq(body, "\n") {
		id, num, ok := strings.Cut(line, " ")
		if !ok || !validName(id) {
			return Notice{}, fmt.Errorf("store: notice: bad line %q", line)
		}
		seq, err := strconv.ParseInt(num, 10, 64)
		if err != nil || seq < 1 || num != strconv.FormatInt(seq, 10) {
			return Notice{}, fmt.Errorf("store: notice: bad seq in line %q", line)
		}
		if _, dup := n.Seqs[id]; dup {
			return Notice{}, fmt.Errorf("store: notice: session %s twice", id)
		}
		n.Seqs[id] = seq
	}
	return n, nil
}

// The verbs of the notices that are commands to every other node.
const (
	notifyUnsubscribe = "unsubscribe"
	notifyForget      = "forget"
	notifyEnded       = "end"
)

// NotifyEnded tells every other node that sessionID's owner dropped its
// runtime (it closed, or a close found it in state error): their
// subscriptions of it end. Without cluster mode it does nothing.
func (db *DB) NotifyEnded(ctx context.Context, sessionID string) error {
	return db.notifyCommand(ctx, notifyEnded, sessionID)
}

// NotifyUnsubscribe tells every other node that sessionID's
// subscriptions end (session.unsubscribe). Without cluster mode it does
// nothing.
func (db *DB) NotifyUnsubscribe(ctx context.Context, sessionID string) error {
	return db.notifyCommand(ctx, notifyUnsubscribe, sessionID)
}

// notifyForgotten tells every other node to drop a revoked key or a
// changed profile from its caches, so that the change holds everywhere at
// once. A failure is logged: the caches expire by themselves (seconds).
func (db *DB) notifyForgotten(ctx context.Context, id string) {
	if err := db.notifyCommand(context.WithoutCancel(ctx), notifyForget, id); err != nil {
		db.log.Warn("tell the other nodes to forget a cached item", "id", id, "err", err)
	}
}

// ForgetCached drops id from this store's caches (a profile another node
// changed).
func (db *DB) ForgetCached(id string) { db.forgetProfile(id) }

func (db *DB) notifyCommand(ctx context.Context, verb, arg string) error {
	if db.w.fence == nil {
		return nil
	}
	if !validName(arg) {
		return fmt.Errorf("store: notify: bad %s argument %q", verb, arg)
	}
	if _, err := db.write.ExecContext(ctx, `SELECT pg_notify($1, $2)`, db.w.notify, notifyPrefix+db.w.fence.node+" "+verb+" "+arg); err != nil {
		return fmt.Errorf("store: notify: %w", err)
	}
	return nil
}

// ring sends the attempt's doorbell: the last seq of every session it
// appended to, in the transaction, so that it is delivered on commit.
func (b *txn) ring(numbered []*wtx) error {
	seqs := make(map[string]int64)
	for _, t := range numbered {
		for _, e := range t.events {
			if e.Seq > seqs[e.SessionID] { // Seq 0: rolled back to its savepoint
				seqs[e.SessionID] = e.Seq
			}
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	payloads := encodeNotices(b.w.fence.node, seqs)
	if _, err := b.tx.ExecContext(b.ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, b.w.notify, payloads); err != nil {
		return fmt.Errorf("store: notify: %w", err)
	}
	return nil
}
