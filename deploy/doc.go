// Package deploy holds the container image, ECS task definition, IAM policy
// and Terraform of the archiver (see README.md). It has no code; its test
// keeps iam-policy.json equal to the AWS operations the code calls.
package deploy
