package engine

import (
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// The API's errors that carry more than a code and a message: a failed
// condition (with the item, when ReturnValuesOnConditionCheckFailure asks)
// and a canceled transaction (with a reason per action). writeError
// (http_serve.go) renders them.

// condFailed is a ConditionalCheckFailedException that carries the item
// (ReturnValuesOnConditionCheckFailure ALL_OLD).
type condFailed struct {
	item attr.Item
}

func (c *condFailed) Error() string {
	return "ConditionalCheckFailedException: The conditional request failed"
}

// txCanceled is a TransactionCanceledException with its reasons.
type txCanceled struct {
	reasons []cancelReason
}

type cancelReason struct {
	Code    string    `json:"Code"`
	Message string    `json:"Message,omitempty"`
	Item    attr.Item `json:"Item,omitempty"`
}

func (t *txCanceled) Error() string { return "TransactionCanceledException: " + t.message() }

func (t *txCanceled) message() string {
	codes := make([]string, len(t.reasons))
	for i, r := range t.reasons {
		codes[i] = r.Code
	}
	return "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"
}
