output "bucket_arn" {
  description = "ARN of the archive bucket."
  value       = var.create_bucket ? aws_s3_bucket.archive[0].arn : "arn:${data.aws_partition.current.partition}:s3:::${var.bucket_name}"
}

output "bucket_name" {
  description = "The archive bucket, once created here: pass it as bucket_name (with create_bucket = false and bucket_region) to the instances of other Regions, so that they are created after it."
  value       = var.create_bucket ? aws_s3_bucket.archive[0].bucket : var.bucket_name
}

output "lease_table_name" {
  description = "The lease and checkpoint table (use as --checkpoint dynamodb://NAME)."
  value       = aws_dynamodb_table.leases.name
}

output "task_role_arn" {
  description = "Role the archiver runs with (deploy/iam-policy.json)."
  value       = aws_iam_role.task.arn
}

output "execution_role_arn" {
  description = "Role ECS uses to pull the image and write logs."
  value       = aws_iam_role.execution.arn
}

output "task_definition_arn" {
  description = "The archiver's task definition."
  value       = aws_ecs_task_definition.archiver.arn
}

output "service_name" {
  description = "The ECS service."
  value       = aws_ecs_service.archiver.name
}

output "log_group" {
  description = "CloudWatch log group of the tasks."
  value       = aws_cloudwatch_log_group.archiver.name
}

output "task_policy_json" {
  description = "The task role's policy as deployed."
  value       = local.task_policy
}

output "alarm_arns" {
  description = "The CloudWatch alarms by name (those of alarms.tf: oldest-unacked-age, dead-lettered-records, dead-letter-failures, trimmed-gaps, iterator-age, reader-failures, ttl-passed-user-deletes, records-near-trim); empty unless metrics = \"emf\"."
  value       = { for k, a in aws_cloudwatch_metric_alarm.archiver : k => a.arn }
}

output "metrics_namespace" {
  description = "CloudWatch namespace of the archiver's metrics (with metrics = \"emf\"); every metric has the dimension table."
  value       = local.metrics_namespace
}

output "ecr_repository_url" {
  description = "With create_ecr_repository: the repository to push the image to (ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME); image is this URL, a colon and the pushed tag. null otherwise."
  value       = var.create_ecr_repository ? aws_ecr_repository.archiver[0].repository_url : null
}
