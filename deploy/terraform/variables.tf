variable "name" {
  description = "Name prefix of every resource (roles, task family, log group, lease table)."
  type        = string
  default     = "ttl-archiver"
}

variable "region" {
  description = "AWS region of the source table, the bucket and the ECS service."
  type        = string
}

variable "source_table" {
  description = "DynamoDB table whose TTL expiries are archived. Its stream must be enabled (NEW_AND_OLD_IMAGES or OLD_IMAGE, so expired items keep their contents)."
  type        = string
}

variable "bucket_name" {
  description = "S3 bucket created for the archive."
  type        = string
}

variable "archive_prefix" {
  description = "Key prefix of the archive objects inside the bucket; the task may write nowhere else. End it with a slash."
  type        = string
  default     = "ttl-archive/"
}

variable "kms_key_arn" {
  description = "KMS key for SSE-KMS on the bucket. Empty: SSE-S3 (AES256) and no KMS permission for the task."
  type        = string
  default     = ""
}

variable "archive_transition_days" {
  description = "Days after which archive objects move to Glacier Instant Retrieval."
  type        = number
  default     = 30
}

variable "archive_expiration_days" {
  description = "Days after which archive objects are deleted; 0 keeps them forever."
  type        = number
  default     = 0
}

variable "image" {
  description = "Container image built from deploy/Dockerfile, e.g. ACCOUNT.dkr.ecr.REGION.amazonaws.com/ttl-archiver:v1.0.0."
  type        = string
}

variable "cluster_arn" {
  description = "ECS cluster that runs the service."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets of the tasks (they need a route to DynamoDB, S3 and CloudWatch Logs: NAT or VPC endpoints)."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the tasks. Outbound HTTPS is all the archiver needs; open 9090 inbound only to your Prometheus."
  type        = list(string)
}

variable "desired_count" {
  description = "Number of archiver tasks. They share the stream's shards through leases in the lease table."
  type        = number
  default     = 2
}

variable "cpu" {
  description = "Task CPU units."
  type        = number
  default     = 512
}

variable "memory" {
  description = "Task memory (MiB)."
  type        = number
  default     = 1024
}

variable "extra_sinks" {
  description = "More sink URLs besides the S3 archive, e.g. [\"nats://nats.internal:4222?subject=archiver.{table}.{kind}\"]. Put credentials in Secrets Manager, not here."
  type        = list(string)
  default     = []
}

variable "log_level" {
  description = "debug, info, warn or error."
  type        = string
  default     = "info"
}

variable "log_retention_days" {
  description = "Retention of the CloudWatch log group."
  type        = number
  default     = 30
}
