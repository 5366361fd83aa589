package demo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/sweep"
)

// CreateSessionTable creates the SessionData table of DynamoDB's TTL
// documentation: partition key UserName, sort key SessionId, a stream with
// both images, and TTL on ExpirationTime; plus the expiration-window index
// `archiver sweep` reads (expirationWindowIndex: expirationWindow,
// ExpirationTime).
func CreateSessionTable(ctx context.Context, c *dynamodb.Client, table string) (streamARN string, err error) {
	out, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("UserName"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SessionId"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(sweep.DefaultWindowAttribute), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("ExpirationTime"), AttributeType: types.ScalarAttributeTypeN},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(sweep.DefaultIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(sweep.DefaultWindowAttribute), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("ExpirationTime"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("UserName"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SessionId"), KeyType: types.KeyTypeRange},
		},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	})
	if err != nil {
		return "", fmt.Errorf("create table %s: %w", table, err)
	}
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String("ExpirationTime"),
			Enabled:       aws.Bool(true),
		},
	}); err != nil {
		return "", fmt.Errorf("enable TTL on %s: %w", table, err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn), nil
}

// PutSession writes one session item that expires at the epoch second exp.
func PutSession(ctx context.Context, c *dynamodb.Client, table, user, session string, exp int64) error {
	created := time.Now().Unix()
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"UserName":       &types.AttributeValueMemberS{Value: user},
			"SessionId":      &types.AttributeValueMemberS{Value: session},
			"CreationTime":   &types.AttributeValueMemberN{Value: strconv.FormatInt(created, 10)},
			"ExpirationTime": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)},
			// The window `archiver sweep` finds the item by.
			sweep.DefaultWindowAttribute: &types.AttributeValueMemberS{Value: sweep.Window(time.Unix(exp, 0), sweep.DefaultWindow, 1)},
			"SessionInfo": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"device": &types.AttributeValueMemberS{Value: "laptop"},
				"pages":  &types.AttributeValueMemberN{Value: "3"},
			}},
		},
	})
	if err != nil {
		return fmt.Errorf("put session %s/%s: %w", user, session, err)
	}
	return nil
}
