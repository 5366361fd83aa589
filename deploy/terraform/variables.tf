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

variable "expired_when" {
  description = "Which REMOVE records the archiver archives as expiries (ARCHIVER_EXPIRED_WHEN): service (DynamoDB's own TTL deletes only) or past-ttl (also deletes made after the item's TTL had passed). Unset: past-ttl when sweeper_count > 0 (the sweeper's deletes carry no TTL identity), else service. Set past-ttl for a global table replica region, whose TTL deletes are replicated from another region without that identity. service beside the sweeper is refused."
  type        = string
  default     = null
  validation {
    condition     = var.expired_when == null ? true : contains(["service", "past-ttl"], var.expired_when)
    error_message = "expired_when must be service or past-ttl (or unset)."
  }
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

variable "metrics" {
  description = "How the archiver publishes its metrics: emf (CloudWatch embedded metric format in its logs, namespace TTLArchiver; the alarms need it), prometheus (/metrics on port 9090, for deploy/grafana; no CloudWatch metrics, so no alarms are created) or none. The archiver does one or the other, not both."
  type        = string
  default     = "emf"
  validation {
    condition     = contains(["emf", "prometheus", "none"], var.metrics)
    error_message = "metrics must be emf, prometheus or none."
  }
}

# --- Alarms (created only with metrics = "emf") ---------------------------

variable "alarm_sns_topic_arn" {
  description = "SNS topic notified when an alarm fires and when it clears. Empty: the alarms only change state."
  type        = string
  default     = ""
}

variable "alarm_oldest_unacked_age_seconds" {
  description = "Alarm when the oldest record not yet acknowledged by every sink that wanted it (or the dead-letter sink) is older than this, on any shard, for 3 minutes."
  type        = number
  default     = 900
}

variable "alarm_dead_lettered_records" {
  description = "Alarm when more records than this go to the dead-letter sink in a minute."
  type        = number
  default     = 0
}

variable "alarm_dead_letter_failures" {
  description = "Alarm when the dead-letter sink fails more writes than this in five minutes."
  type        = number
  default     = 0
}

variable "alarm_trimmed_gaps" {
  description = "Alarm when more trimmed gaps than this (records the stream dropped before they were read: lost) are met in a minute."
  type        = number
  default     = 0
}

variable "alarm_iterator_age_seconds" {
  description = "Alarm when reading is further behind the stream than this for 10 minutes, or no task has published metrics for 10 minutes."
  type        = number
  default     = 600
}

variable "alarm_reader_failures" {
  description = "Alarm when more shard readers than this fail in 15 minutes."
  type        = number
  default     = 0
}

variable "alarm_ttl_passed_user_deletes" {
  description = "Alarm when more deletes than this in 15 minutes came after the item's TTL without DynamoDB's TTL identity while the archiver runs with expired_when = service (they are archived as deleted, not expired: a sweeper or a global table replica needs past-ttl). Raise it for a table whose application deletes items after their TTL on purpose."
  type        = number
  default     = 0
}

variable "alarm_records_near_trim" {
  description = "Alarm when more shards than this hold an unacknowledged record within 2 h of the stream's 24 h trim."
  type        = number
  default     = 0
}
