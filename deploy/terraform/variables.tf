variable "name" {
  description = "Name prefix of every resource (roles, task family, log group, lease table)."
  type        = string
  default     = "ttl-archiver"
}

variable "region" {
  description = "AWS region of the source table, the bucket and the ECS service."
  type        = string
}

variable "regions" {
  description = "The Regions whose replicas of source_table (a global table) this deployment reads (ARCHIVER_REGIONS), each stream with clients signed for its Region: a list, or [\"all\"] (every Region the table's description lists, which replica_regions must name for IAM). Each Region's stream marks the expiries its own TTL performed, so reading every replica archives every expiry once; streams read from another Region are cross-Region data transfer. Empty: region alone. Not with per_region, nor with expired_when = past-ttl over several Regions."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for r in var.regions : r == "all" || can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r))]) && length(distinct(var.regions)) == length(var.regions) && (!contains(var.regions, "all") || length(var.regions) == 1)
    error_message = "regions must be Region names such as us-east-1, each once, or [\"all\"] alone."
  }
}

variable "replica_regions" {
  description = "With regions = [\"all\"]: the Regions of the table's replicas, which the task role may then read (DescribeTable, DescribeTimeToLive and the stream in each). The archiver learns them from DescribeTable at start-up; a Region missing here is refused to it (AccessDenied). region is always included."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for r in var.replica_regions : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r))]) && length(distinct(var.replica_regions)) == length(var.replica_regions)
    error_message = "replica_regions must be Region names such as us-east-1, each once."
  }
}

variable "per_region" {
  description = "This is one of the archivers of a global table, one per Region, each applying this module in its own Region (ARCHIVER_PER_REGION): a table read in region alone is then logged at INFO rather than WARN. All of them may write to one bucket (create_bucket = false and bucket_region in all but one); give each its own name (IAM role names are global). Not with regions, nor with expired_when = past-ttl."
  type        = bool
  default     = false
}

variable "source_table" {
  description = "DynamoDB table whose TTL expiries are archived (ARCHIVER_TABLE). Its stream must be enabled (NEW_AND_OLD_IMAGES or OLD_IMAGE, so expired items keep their contents). Empty with tables_tagged: the tagged tables alone."
  type        = string
  default     = ""
}

variable "tables_tagged" {
  description = "Archive every table of region carrying all these tags (ARCHIVER_TABLES_TAGGED, e.g. { archive = \"yes\" }), also tables tagged or created while the service runs, besides source_table. The task role may then list tables and their tags, and read the metadata and stream of every table whose name begins with tagged_table_prefix. Not with regions, nor with per_region; the alarms then watch every table at once (CloudWatch Metrics Insights)."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for k, v in var.tables_tagged : length(k) >= 1 && length(k) <= 128 && length(v) <= 256 && !strcontains(k, "=") && !strcontains(k, ",") && !strcontains(v, ",")])
    error_message = "tables_tagged: each tag key must be 1 to 128 characters without '=' or ',', each value at most 256 characters without ','."
  }
}

variable "tagged_table_prefix" {
  description = "With tables_tagged: the task role reads the metadata and streams of the tables whose names begin with this (table/PREFIX* in IAM). Empty: every table of the account in region, which is what a tag alone selects; a prefix keeps the role from reading tables the tag was not meant for."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{0,254}$", var.tagged_table_prefix))
    error_message = "tagged_table_prefix must be the start of a DynamoDB table name: letters, digits, '_', '-' and '.' only."
  }
}

variable "tables_refresh" {
  description = "With tables_tagged: how often the tables' tags are read again (ARCHIVER_TABLES_REFRESH, a Go duration). Null: the archiver's default, 30s."
  type        = string
  default     = null
  validation {
    condition     = var.tables_refresh == null || can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$", var.tables_refresh))
    error_message = "tables_refresh must be a Go duration such as 30s or 2m."
  }
}

variable "bucket_name" {
  description = "S3 bucket of the archive: created here, or with create_bucket = false one that exists (created by another instance of this module, e.g. one per Region of a global table)."
  type        = string
}

variable "create_bucket" {
  description = "Create bucket_name here, in region, with its encryption, lifecycle and TLS-only policy. false: bucket_name exists, in bucket_region, and this instance only writes to it (one bucket for the archivers of several Regions: create it with one instance and pass its bucket_name output to the others)."
  type        = bool
  default     = true
}

variable "bucket_region" {
  description = "Region of bucket_name when create_bucket = false and it is not region (unset: region). The S3 sinks then name it (region=), and every object crosses Regions (cross-Region data transfer). kms_key_arn must be a key of this Region."
  type        = string
  default     = null
  validation {
    condition     = var.bucket_region == null ? true : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", var.bucket_region))
    error_message = "bucket_region must be a Region name such as eu-west-1 (or unset: region)."
  }
}

variable "archive_prefix" {
  description = "Key prefix of the archive objects inside the bucket; the task may write nowhere else. End it with a slash."
  type        = string
  default     = "ttl-archive/"
}

variable "dead_letter_prefix" {
  description = "Key prefix, in the archive bucket, of the dead-letter sink (ARCHIVER_DEAD_LETTER = s3://bucket_name/dead_letter_prefix, with the archive's encryption): events a sink fails permanently or for longer than retry_for, and records that cannot be decoded, each with the failing sink and the error; the dead-letter alarms watch it. End it with a slash; it must not overlap archive_prefix. Empty: no dead-letter sink, failing batches are retried until fixed (the checkpoint waits) and the oldest-unacked-age and records-near-trim alarms speak."
  type        = string
  default     = "dead-letter/"
  validation {
    condition     = var.dead_letter_prefix == "" || endswith(var.dead_letter_prefix, "/")
    error_message = "dead_letter_prefix must end with a slash (or be empty: no dead-letter sink)."
  }
}

variable "retry_for" {
  description = "With a dead-letter sink (ARCHIVER_RETRY_FOR): how long a batch may keep failing at one sink before its events go to the dead-letter sink (a Go duration)."
  type        = string
  default     = "15m"
}

variable "kms_key_arn" {
  description = "KMS key for SSE-KMS on the bucket, a key ARN in the bucket's Region (S3 encrypts with a key of the bucket's Region, for writers from every Region). Empty: SSE-S3 (AES256) and no KMS permission for the task."
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
  description = "Container image built by make image (or from deploy/Dockerfile), tagged with its version (git describe; deploy/README.md, section 2), e.g. ACCOUNT.dkr.ecr.REGION.amazonaws.com/ttl-archiver:v1.0.0 (with create_ecr_repository: the ecr_repository_url output, a colon and the tag). Never latest: a tag names one build."
  type        = string
}

variable "create_ecr_repository" {
  description = "Create an ECR repository named name for the image (ecr.tf): immutable tags, scan on push, a lifecycle policy keeping the last ecr_keep_images tagged images; its URL is the ecr_repository_url output, and image is then that URL and a tag (deploy/README.md, sections 2 and 3). false: the image lives elsewhere."
  type        = bool
  default     = false
}

variable "ecr_keep_images" {
  description = "With create_ecr_repository: how many tagged images (versions) the repository keeps; older ones expire. Keep it above the builds pushed between two deploys: a task that starts pulls its image again, and a rollback needs the previous one."
  type        = number
  default     = 30
  validation {
    condition     = var.ecr_keep_images >= 1 && floor(var.ecr_keep_images) == var.ecr_keep_images
    error_message = "ecr_keep_images must be a whole number, at least 1."
  }
}

variable "cluster_arn" {
  description = "ECS cluster that runs the service."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets of the tasks (they need a route to DynamoDB, S3, CloudWatch Logs and ECR, and to Secrets Manager or SSM with secrets: NAT or VPC endpoints; and to the NATS servers of extra_sinks)."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the tasks. Outbound: HTTPS (443) to the AWS endpoints, and with a nats:// sink TCP to its servers' port (4222 unless the URL says otherwise; TLS on that port with tls-ca=). Inbound: nothing, or 9090 from your Prometheus only."
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
  description = "Task memory (MiB). The task's ARCHIVER_MAX_IN_FLIGHT_BYTES is an eighth of it; deploy/README.md, \"Memory\", gives the rule (2.5 times the budget plus 64 MiB, under the archiver's soft limit of 85 %)."
  type        = number
  default     = 1024
}

variable "extra_sinks" {
  description = "More sink URLs besides the S3 archive, e.g. [\"nats://nats.internal:4222?subject=archiver.{table}.{kind}&creds-env=NATS_CREDS\"]. No secret goes in a URL: name an environment variable (creds-env=, nkey-env=, token-env=) that secrets fills."
  type        = list(string)
  default     = []
}

variable "secrets" {
  description = "Environment variables of the archiver's task filled by ECS from Secrets Manager or SSM Parameter Store: name => ARN of the secret (optionally with :json-key:version-stage:version-id) or of the parameter, e.g. { NATS_CREDS = \"arn:aws:secretsmanager:REGION:ACCOUNT:secret:nats-creds-AbCdEf\" } for nats://...?creds-env=NATS_CREDS. The execution role may read exactly these (plus kms:Decrypt on secrets_kms_key_arns); the archiver reads them from its environment and never logs them. Names are not ARCHIVER_* settings."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for n, arn in var.secrets : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", n)) && !startswith(n, "ARCHIVER_") && can(regex("^arn:[^:]+:(secretsmanager:[^:]+:[0-9]{12}:secret:[^:]+(:[^:]*:[^:]*:[^:]*)?|ssm:[^:]+:[0-9]{12}:parameter/.+)$", arn))])
    error_message = "secrets: each name must be an environment variable name not starting with ARCHIVER_, each value the ARN of a Secrets Manager secret (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME[:JSON-KEY:VERSION-STAGE:VERSION-ID]) or of an SSM parameter (arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME)."
  }
}

variable "secrets_kms_key_arns" {
  description = "Customer managed KMS keys that encrypt the secrets (empty: the AWS managed keys, which need no grant)."
  type        = list(string)
  default     = []
}

variable "expired_when" {
  description = "Which REMOVE records the archiver archives as expiries (ARCHIVER_EXPIRED_WHEN): service (DynamoDB's own TTL deletes only) or past-ttl (also deletes made after the item's TTL had passed). Unset: past-ttl when sweeper_count > 0 (the sweeper's deletes carry no TTL identity), else service. On a global table, service archives the expiries of the Regions read (per_region, or regions), and past-ttl in one Region archives every Region's (the others' reach its stream as replicated deletes); past-ttl is refused with per_region or over several regions, service beside the sweeper."
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
  description = "How the archiver publishes its metrics (ARCHIVER_METRICS): emf (CloudWatch embedded metric format in its logs every minute, namespace TTLArchiver, and /metrics on port 9090 as well, so the alarms and deploy/grafana can watch one deployment), prometheus (/metrics on port 9090 only; no CloudWatch metrics, so no alarms are created) or none. The alarms are created with emf only."
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
  description = "Alarm when more deletes than this in 15 minutes came after the item's TTL without DynamoDB's TTL identity while the archiver runs with expired_when = service (they are archived as deleted, not expired: a sweeper needs past-ttl; on a global table the archiver counts such deletes, mostly the other Regions' replicated expiries, in archiver_replicated_ttl_deletes_total instead). Raise it for a table whose application deletes items after their TTL on purpose."
  type        = number
  default     = 0
}

variable "alarm_records_near_trim" {
  description = "Alarm when more shards than this hold an unacknowledged record within 2 h of the stream's 24 h trim."
  type        = number
  default     = 0
}
