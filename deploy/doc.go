// Package deploy holds the container image, ECS task definition, IAM policy,
// Terraform and Athena SQL of the archiver (see README.md). It has no code;
// its tests keep iam-policy.json equal to the AWS operations the code calls,
// and run the Athena views of athena/ with DuckDB (tools/duckq) over an
// archive the S3 sink wrote.
package deploy
