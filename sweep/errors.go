package sweep

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/internal/awserr"
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

// classify maps an error of a DynamoDB call made under ctx to an outcome:
// [awserr.Classify]'s classes, with a failed condition as an answer and a
// timeout of the call's own (ctx still running) as transient.
func classify(ctx context.Context, err error) outcome {
	if err == nil {
		return done
	}
	if ctx.Err() != nil {
		return stopped
	}
	if awserr.IsConditionFailed(err) {
		return condFailed
	}
	switch awserr.Classify(err) {
	case awserr.Throttled:
		return throttled
	case awserr.Rejected, awserr.Refused:
		return permanent
	}
	// 5xx, a server fault, a conflict, or no answer at all (connection
	// refused or reset, EOF, a timeout of the client's own).
	return transient
}

// noSDKRetry turns the client's retries off for one call: the sweeper
// retries itself.
func noSDKRetry(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }
