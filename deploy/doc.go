// Package deploy holds the container image, ECS task definition, IAM policy,
// Terraform and Athena SQL of the archiver (see README.md). Its only Go code
// is tests: they keep the IAM policies equal to the AWS operations the code
// calls (the archiver's in every Region a global table is read in), every
// ARCHIVER_* name and Terraform variable wired to the binary, the
// Terraform's refusals and examples consistent with the module (and, where
// terraform is installed, planned against a mock provider), the image
// `make image` builds (tools/mkimage) equal to the Dockerfile's contract,
// and run the Athena views of athena/ with DuckDB (tools/duckq)
// over an archive the S3 sink wrote.
package deploy
