// Package deploy holds the container image, ECS task definition, IAM policy,
// Terraform and Athena SQL of the archiver (see README.md). Its only Go code
// is tests: they keep the IAM policies equal to the AWS operations the code
// calls, every ARCHIVER_* name and Terraform variable wired to the binary,
// the image `make image` builds (tools/mkimage) equal to the Dockerfile's
// contract, and run the Athena views of athena/ with DuckDB (tools/duckq)
// over an archive the S3 sink wrote.
package deploy
