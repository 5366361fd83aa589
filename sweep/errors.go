package sweep

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// outcome is what the sweeper makes of a call's error.
type outcome int

const (
	done       outcome = iota // no error
	condFailed                // ConditionalCheckFailedException: not an error
	throttled                 // slow down and retry
	transient                 // retry
	permanent                 // retrying the same request will not help
	stopped                   // ctx ended
)

// throttleCodes are DynamoDB's "slow down" codes.
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
	"LimitExceededException":                 true,
}

// transientCodes are client faults that a later retry may not meet.
var transientCodes = map[string]bool{
	"TransactionConflictException":     true,
	"ReplicatedWriteConflictException": true,
}

// classify maps an error of a DynamoDB call made under ctx to an outcome.
func classify(ctx context.Context, err error) outcome {
	if err == nil {
		return done
	}
	if ctx.Err() != nil {
		return stopped
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return condFailed
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case code == "ConditionalCheckFailedException":
			return condFailed
		case throttleCodes[code]:
			return throttled
		case transientCodes[code] || api.ErrorFault() == smithy.FaultServer:
			return transient
		}
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		return permanent
	}
	// 5xx, or no answer at all (connection refused or reset, EOF, a
	// timeout of the client's own).
	return transient
}

// noSDKRetry turns the client's retries off for one call: the sweeper
// retries itself.
func noSDKRetry(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }
