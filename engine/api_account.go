package engine

import "context"

// The calls about the account and endpoint rather than a table:
// DescribeEndpoints and DescribeLimits.

func (e *Engine) opDescribeEndpoints(ctx context.Context, body []byte) (any, error) {
	region, _ := e.regionFor(ctx)
	return map[string]any{"Endpoints": []map[string]any{{"Address": "dynamodb." + region + ".amazonaws.com", "CachePeriodInMinutes": 1440}}}, nil
}

func (e *Engine) opDescribeLimits(ctx context.Context, body []byte) (any, error) {
	return map[string]any{"AccountMaxReadCapacityUnits": 80000, "AccountMaxWriteCapacityUnits": 80000,
		"TableMaxReadCapacityUnits": 40000, "TableMaxWriteCapacityUnits": 40000}, nil
}
