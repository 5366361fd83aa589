package engine

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// TransactWriteItems idempotency (ClientRequestToken).
//
// As in DynamoDB, a token is remembered for 10 minutes (by the engine's
// Clock) after the transaction that used it completed. Within that window
// a call with the same token and the same TransactItems is not applied
// again: it answers the first call's result, with ConsumedCapacity (when
// asked, in the replay's own ReturnConsumedCapacity mode) in read units,
// what DynamoDB documents a replay consumes. The same token with other
// TransactItems is an IdempotentParameterMismatchException; a token whose
// transaction is still running is a TransactionInProgressException. A
// transaction that fails (canceled, invalid) leaves no token behind, so
// retrying it runs it.
//
// TransactItems are compared decoded: the digest is taken over their
// canonical encoding (attribute maps and expression maps with sorted keys,
// numbers as canonical decimals), so JSON key order and number spelling do
// not matter. ReturnConsumedCapacity and ReturnItemCollectionMetrics are
// not part of the comparison: they shape the response, not the writes.

const (
	// txTokenTTL is how long a completed transaction's token is remembered.
	txTokenTTL = 10 * time.Minute
	// maxTxTokens bounds the completed tokens remembered at once (a few
	// hundred bytes each); past it the oldest are forgotten before their
	// 10 minutes are up.
	maxTxTokens = 1 << 17

	codeIdempotentMismatch = "IdempotentParameterMismatchException"
	codeTxInProgress       = "TransactionInProgressException"
)

// txTokens remembers the ClientRequestTokens of one engine's recent
// TransactWriteItems calls. The zero value is ready to use.
type txTokens struct {
	mu    sync.Mutex
	m     map[string]*txToken
	queue []txTokenRef // completed tokens in completion order
}

type txToken struct {
	digest  [sha256.Size]byte
	done    bool      // the transaction completed; result is set
	expires time.Time // when done: forgotten from then on
	result  *txResult
}

type txTokenRef struct {
	token string
	ent   *txToken
}

// checkClientRequestToken validates the parameter's length (1..36).
func checkClientRequestToken(tok *string) error {
	if tok == nil {
		return nil
	}
	const field = "1 validation error detected: Value '%s' at 'clientRequestToken' failed to satisfy constraint: "
	switch n := utf8.RuneCountInString(*tok); {
	case n < 1:
		return awserr.Validation(field+"Member must have length greater than or equal to 1", *tok)
	case n > 36:
		return awserr.Validation(field+"Member must have length less than or equal to 36", *tok)
	}
	return nil
}

// txDigest is the digest of a transaction's canonical TransactItems.
func txDigest(items []txWriteItem) ([sha256.Size]byte, error) {
	b, err := json.Marshal(items)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// begin claims token for a transaction with digest at now. It returns the
// remembered result when the token's transaction already completed with
// the same digest (a replay: do not apply again), an error when the
// digest differs or that transaction is still running, and nil, nil when
// the caller now owns the token and must end with finish or abort.
func (c *txTokens) begin(token string, digest [sha256.Size]byte, now time.Time) (*txResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	if ent := c.m[token]; ent != nil && !(ent.done && !now.Before(ent.expires)) {
		switch {
		case ent.digest != digest:
			return nil, awserr.New(codeIdempotentMismatch, "DynamoDB rejected the request because you retried a request with a different payload but with an idempotent token that was already used.")
		case !ent.done:
			return nil, awserr.New(codeTxInProgress, "Transaction from previous request is still in progress")
		}
		return ent.result, nil
	}
	if c.m == nil {
		c.m = map[string]*txToken{}
	}
	c.m[token] = &txToken{digest: digest}
	return nil, nil
}

// finish records the result of token's transaction, completed at now.
func (c *txTokens) finish(token string, res *txResult, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ent := c.m[token]
	if ent == nil || ent.done {
		return
	}
	ent.done, ent.expires, ent.result = true, now.Add(txTokenTTL), res
	c.queue = append(c.queue, txTokenRef{token, ent})
	c.expireLocked(now)
}

// abort forgets the token of a transaction that failed.
func (c *txTokens) abort(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ent := c.m[token]; ent != nil && !ent.done {
		delete(c.m, token)
	}
}

// expireLocked forgets, oldest first, the completed tokens whose window
// has passed and any beyond maxTxTokens. c.mu is held.
func (c *txTokens) expireLocked(now time.Time) {
	for len(c.queue) > 0 && (!now.Before(c.queue[0].ent.expires) || len(c.queue) > maxTxTokens) {
		ref := c.queue[0]
		c.queue[0] = txTokenRef{}
		c.queue = c.queue[1:]
		if c.m[ref.token] == ref.ent {
			delete(c.m, ref.token)
		}
	}
}
