# TTL Archiver on ECS Fargate: the archive bucket, the lease table, the task
# and execution roles, the log group, the task definition and the service.
# The task role's policy is deploy/iam-policy.json itself, filled in here, so
# the policy the code is tested against is the policy that is deployed.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
  }
}

provider "aws" {
  region = var.region
}

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  lease_table = "${var.name}-leases"
  use_kms     = var.kms_key_arn != ""
  # The bucket, created here unless create_bucket = false, and its Region.
  bucket_count  = var.create_bucket ? 1 : 0
  bucket_region = var.bucket_region != null ? var.bucket_region : var.region

  # The Regions whose replica of source_table the task may describe and
  # whose stream it may read: region always (run checks the table there
  # first), and those regions names (["all"]: replica_regions).
  source_regions = distinct(concat([var.region], contains(var.regions, "all") ? var.replica_regions : var.regions))
  # ARCHIVER_REGIONS and ARCHIVER_PER_REGION, only when set.
  regions_env = concat(
    length(var.regions) > 0 ? [{ name = "ARCHIVER_REGIONS", value = join(",", var.regions) }] : [],
    var.per_region ? [{ name = "ARCHIVER_PER_REGION", value = "true" }] : []
  )
  # The tables read: source_table (ARCHIVER_TABLE) and, with tables_tagged,
  # every table of region carrying the tags (ARCHIVER_TABLES_TAGGED), whose
  # names IAM can only know by their prefix: source_tables are the names
  # (table/NAME) the statements on the source grant, one policy rendering
  # each.
  tagged        = length(var.tables_tagged) > 0
  source_tables = compact([var.source_table, local.tagged ? "${var.tagged_table_prefix}*" : ""])
  tables_env = concat(
    var.source_table != "" ? [{ name = "ARCHIVER_TABLE", value = var.source_table }] : [],
    local.tagged ? [{ name = "ARCHIVER_TABLES_TAGGED", value = join(",", [for k, v in var.tables_tagged : "${k}=${v}"]) }] : [],
    local.tagged && var.tables_refresh != null ? [{ name = "ARCHIVER_TABLES_REFRESH", value = var.tables_refresh }] : []
  )

  policy_vars = {
    partition    = data.aws_partition.current.partition
    region       = var.region
    account_id   = data.aws_caller_identity.current.account_id
    source_table = try(local.source_tables[0], "")
    lease_table  = local.lease_table
    bucket       = var.bucket_name
    prefix       = var.archive_prefix
    kms_key_arn  = var.kms_key_arn
    # Empty without a dead-letter sink: its statements are dropped below,
    # or they would grant the whole bucket.
    dead_letter_prefix = var.dead_letter_prefix
  }
  policy_template = jsondecode(templatefile("${path.module}/../iam-policy.json", local.policy_vars))
  # iam-policy.json filled in for each Region the source is read in and
  # each name of source_tables: the statements on the source tables and
  # their streams (source_sids) take the Resource of every one of them, all
  # others (the lease table, the bucket, the key) region's alone.
  policy_by_region = [for p in setproduct(local.source_regions, local.source_tables) : jsondecode(templatefile("${path.module}/../iam-policy.json", merge(local.policy_vars, { region = p[0], source_table = p[1] })))]
  source_sids      = ["ReadSourceTableMetadata", "ReadSourceStream"]
  # The KMS statement only applies with SSE-KMS, the dead-letter ones only
  # with a dead-letter sink.
  use_dead_letter = var.dead_letter_prefix != ""
  task_policy_drop = concat(
    local.use_kms ? [] : ["EncryptArchiveWithKMS"],
    local.tagged ? [] : ["FindTaggedTables"],
    local.use_dead_letter ? [] : ["WriteDeadLetters", "PreflightRemoveDeadLetterMarker"]
  )
  task_policy = jsonencode(merge(local.policy_template, {
    Statement = [for i, s in local.policy_template.Statement : merge(s, {
      Resource = contains(local.source_sids, s.Sid) ? flatten([for p in local.policy_by_region : p.Statement[i].Resource]) : flatten([s.Resource])
    }) if !contains(local.task_policy_drop, s.Sid)]
  }))

  # The sweeper's deletes carry no TTL identity: only past-ttl archives them
  # as expiries (docs/DESIGN.md, "Which REMOVE is an expiry").
  expired_when = var.expired_when != null ? var.expired_when : (var.sweeper_count > 0 ? "past-ttl" : "service")

  sse = local.use_kms ? "aws:kms" : "AES256"
  # The S3 sinks' parameters: the encryption and, with SSE-KMS, the key:
  # a PUT that asks for aws:kms without naming a key is encrypted with the
  # AWS managed key aws/s3, not with the bucket's default key. And the
  # bucket's Region when it is not the task's (the sink's client signs
  # for the task's Region otherwise).
  s3_params = join("&", concat(["sse=${local.sse}"], local.use_kms ? ["kms-key-id=${var.kms_key_arn}"] : [], local.bucket_region != var.region ? ["region=${local.bucket_region}"] : []))
  s3_sink   = "s3://${var.bucket_name}/${var.archive_prefix}?${local.s3_params}"
  sinks     = concat([local.s3_sink], var.extra_sinks)
  # The dead-letter sink, in the archive bucket under its own prefix.
  dead_letter = local.use_dead_letter ? "s3://${var.bucket_name}/${var.dead_letter_prefix}?${local.s3_params}" : ""
  dead_letter_env = local.use_dead_letter ? [
    { name = "ARCHIVER_DEAD_LETTER", value = local.dead_letter },
    { name = "ARCHIVER_RETRY_FOR", value = var.retry_for },
  ] : []

  # ECS reads the task's secrets with the execution role: a Secrets
  # Manager value may name a JSON key and version after the secret's ARN
  # (7 fields), the role is granted the secret itself.
  # The container's secrets block only when there are secrets: ECS
  # leaves an empty list out, which would show as a change at every plan.
  container_secrets = length(var.secrets) > 0 ? { secrets = [for name, arn in var.secrets : { name = name, valueFrom = arn }] } : {}
  secret_arns       = distinct([for arn in values(var.secrets) : join(":", slice(split(":", arn), 0, 7)) if split(":", arn)[2] == "secretsmanager"])
  parameter_arns    = distinct([for arn in values(var.secrets) : arn if split(":", arn)[2] == "ssm"])
}

# --- Archive bucket -------------------------------------------------------
# Created here unless create_bucket = false: then bucket_name is a bucket
# created elsewhere (by another instance of this module, one per Region of
# a global table, all writing to one bucket), in bucket_region.

resource "aws_s3_bucket" "archive" {
  count  = local.bucket_count
  bucket = var.bucket_name
}

resource "aws_s3_bucket_ownership_controls" "archive" {
  count  = local.bucket_count
  bucket = aws_s3_bucket.archive[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "archive" {
  count                   = local.bucket_count
  bucket                  = aws_s3_bucket.archive[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "archive" {
  count  = local.bucket_count
  bucket = aws_s3_bucket.archive[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = local.use_kms ? "aws:kms" : "AES256"
      kms_master_key_id = local.use_kms ? var.kms_key_arn : null
    }
    bucket_key_enabled = local.use_kms
  }
}

resource "aws_s3_bucket_versioning" "archive" {
  count  = local.bucket_count
  bucket = aws_s3_bucket.archive[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "archive" {
  count  = local.bucket_count
  bucket = aws_s3_bucket.archive[0].id

  rule {
    id     = "archive-tiering"
    status = "Enabled"
    filter {
      prefix = var.archive_prefix
    }
    transition {
      days          = var.archive_transition_days
      storage_class = "GLACIER_IR"
    }
    dynamic "expiration" {
      for_each = var.archive_expiration_days > 0 ? [1] : []
      content {
        days = var.archive_expiration_days
      }
    }
    noncurrent_version_expiration {
      noncurrent_days = 30
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

# Refuse plain-HTTP access to the archive.
resource "aws_s3_bucket_policy" "archive" {
  count  = local.bucket_count
  bucket = aws_s3_bucket.archive[0].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyInsecureTransport"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.archive[0].arn, "${aws_s3_bucket.archive[0].arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  depends_on = [aws_s3_bucket_public_access_block.archive]
}

# The bucket's resources took a count (create_bucket): the bucket a
# configuration made before that is instance [0].
moved {
  from = aws_s3_bucket.archive
  to   = aws_s3_bucket.archive[0]
}
moved {
  from = aws_s3_bucket_ownership_controls.archive
  to   = aws_s3_bucket_ownership_controls.archive[0]
}
moved {
  from = aws_s3_bucket_public_access_block.archive
  to   = aws_s3_bucket_public_access_block.archive[0]
}
moved {
  from = aws_s3_bucket_server_side_encryption_configuration.archive
  to   = aws_s3_bucket_server_side_encryption_configuration.archive[0]
}
moved {
  from = aws_s3_bucket_versioning.archive
  to   = aws_s3_bucket_versioning.archive[0]
}
moved {
  from = aws_s3_bucket_lifecycle_configuration.archive
  to   = aws_s3_bucket_lifecycle_configuration.archive[0]
}
moved {
  from = aws_s3_bucket_policy.archive
  to   = aws_s3_bucket_policy.archive[0]
}

# --- Lease and checkpoint table -------------------------------------------
# One item per shard (stream_arn, shard_id): owner, lease counter, expiry,
# checkpoint. Created here, so the archiver's create=true is not needed.

resource "aws_dynamodb_table" "leases" {
  name         = local.lease_table
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "stream_arn"
  range_key    = "shard_id"

  attribute {
    name = "stream_arn"
    type = "S"
  }
  attribute {
    name = "shard_id"
    type = "S"
  }

  point_in_time_recovery {
    enabled = true
  }
  server_side_encryption {
    enabled = true
  }
}

# --- Roles ----------------------------------------------------------------

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${data.aws_partition.current.partition}:ecs:${var.region}:${data.aws_caller_identity.current.account_id}:*"]
    }
  }
}

# The task role: what the archiver itself may do (deploy/iam-policy.json).
resource "aws_iam_role" "task" {
  name               = "${var.name}-task"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

resource "aws_iam_role_policy" "task" {
  name   = "${var.name}-archiver"
  role   = aws_iam_role.task.id
  policy = local.task_policy
}

# The execution role: what ECS needs to start the task (pull the image,
# write logs). The archiver never runs with it.
resource "aws_iam_role" "execution" {
  name               = "${var.name}-execution"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

# The task's secrets (var.secrets): ECS reads them with the execution role
# when the task starts and hands them over as environment variables, so
# the archiver needs neither these permissions nor a writable file system.
resource "aws_iam_role_policy" "execution_secrets" {
  count = length(var.secrets) > 0 ? 1 : 0
  name  = "${var.name}-secrets"
  role  = aws_iam_role.execution.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat(
      length(local.secret_arns) > 0 ? [{ Sid = "ReadTaskSecrets", Effect = "Allow", Action = ["secretsmanager:GetSecretValue"], Resource = local.secret_arns }] : [],
      length(local.parameter_arns) > 0 ? [{ Sid = "ReadTaskParameters", Effect = "Allow", Action = ["ssm:GetParameters"], Resource = local.parameter_arns }] : [],
      length(var.secrets_kms_key_arns) > 0 ? [{ Sid = "DecryptTaskSecrets", Effect = "Allow", Action = ["kms:Decrypt"], Resource = var.secrets_kms_key_arns }] : []
    )
  })
}

# --- Logs, task definition, service --------------------------------------

resource "aws_cloudwatch_log_group" "archiver" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
}

resource "aws_ecs_task_definition" "archiver" {
  family                   = var.name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  task_role_arn            = aws_iam_role.task.arn
  execution_role_arn       = aws_iam_role.execution.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  container_definitions = jsonencode([merge({
    name                   = "archiver"
    image                  = var.image
    essential              = true
    command                = ["run"]
    user                   = "65532:65532"
    readonlyRootFilesystem = true
    stopTimeout            = 30
    portMappings           = [{ containerPort = 9090, protocol = "tcp", name = "metrics" }]
    environment = concat([
      { name = "ARCHIVER_REGION", value = var.region },
      { name = "ARCHIVER_CHECKPOINT", value = "dynamodb://${aws_dynamodb_table.leases.name}" },
      { name = "ARCHIVER_SINK", value = join(",", local.sinks) },
      { name = "ARCHIVER_EXPIRED_WHEN", value = local.expired_when },
      { name = "ARCHIVER_SHUTDOWN_TIMEOUT", value = "25s" },
      # An eighth of the task's memory for records in flight. The rule
      # (deploy/README.md, "Memory"): the process peaks near 2.5 times
      # the budget plus 64 MiB, which must stay under the soft memory limit
      # the archiver sets at 85 % of the task's; an eighth leaves the rest
      # for the shards read at once (TestMemorySizing).
      { name = "ARCHIVER_MAX_IN_FLIGHT_BYTES", value = "${floor(var.memory / 8)}MiB" },
      { name = "ARCHIVER_LOG_LEVEL", value = var.log_level },
      { name = "ARCHIVER_METRICS", value = var.metrics },
      { name = "ARCHIVER_METRICS_ADDR", value = ":9090" },
    ], local.tables_env, local.regions_env, local.dead_letter_env)
    healthCheck = {
      command     = ["CMD", "/archiver", "health", "--quiet"]
      interval    = 30
      timeout     = 5
      retries     = 3
      startPeriod = 30
    }
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        "awslogs-group"         = aws_cloudwatch_log_group.archiver.name
        "awslogs-region"        = var.region
        "awslogs-stream-prefix" = "archiver"
      }
    }
  }, local.container_secrets)])

  lifecycle {
    precondition {
      condition     = var.source_table != "" || local.tagged
      error_message = "Name the tables to archive: source_table, tables_tagged, or both."
    }
    precondition {
      condition     = !(local.tagged && (length(var.regions) > 0 || var.per_region))
      error_message = "tables_tagged reads the tagged tables of region alone: regions and per_region are for the replicas of source_table (a global table); deploy the tagged tables' archiver on its own."
    }
    precondition {
      condition     = !(var.sweeper_count > 0 && local.expired_when == "service")
      error_message = "expired_when = \"service\" with sweeper_count > 0: the sweeper's deletes would be archived as deleted, not expired. Set expired_when = \"past-ttl\" or leave it unset."
    }
    precondition {
      condition     = !local.use_dead_letter || !(startswith(var.dead_letter_prefix, var.archive_prefix) || startswith(var.archive_prefix, var.dead_letter_prefix))
      error_message = "dead_letter_prefix and archive_prefix overlap: dead letters would be read as archive lines by restore and verify. Give them distinct prefixes."
    }
    precondition {
      condition     = !(local.expired_when == "past-ttl" && (length(var.regions) > 1 || contains(var.regions, "all")))
      error_message = "expired_when = past-ttl (the default with sweeper_count > 0) over several Regions: under past-ttl every Region's stream holds every expiry of a global table (its own TTL's, and the others' as replicated deletes past their TTL), so each would be archived once per Region read (archiver run refuses it). Run one past-ttl archiver, and the sweeper, in one Region: regions unset (or one Region)."
    }
    precondition {
      condition     = !(local.expired_when == "past-ttl" && var.per_region)
      error_message = "expired_when = past-ttl (the default with sweeper_count > 0) with per_region: each Region's past-ttl archiver would archive every expiry of the global table, each Region's stream holding the others' as replicated deletes past their TTL (archiver run refuses it). Run one past-ttl archiver, and the sweeper, in one Region, without per_region: it archives them all."
    }
    precondition {
      condition     = !(length(var.regions) > 0 && var.per_region)
      error_message = "regions and per_region together: regions reads several Regions from this deployment, per_region says another deployment reads each other Region (archiver run refuses both). Give one of them."
    }
    precondition {
      condition     = !contains(var.regions, "all") || length(var.replica_regions) > 0
      error_message = "regions = [\"all\"] without replica_regions: the archiver reads every Region the table has a replica in, and the task role may read only the Regions it is given. List them in replica_regions (aws dynamodb describe-table --table-name TABLE --query 'Table.Replicas[].RegionName')."
    }
    precondition {
      condition     = length(var.replica_regions) == 0 || contains(var.regions, "all")
      error_message = "replica_regions without regions = [\"all\"]: it lists the Regions the task role may read for regions = [\"all\"]; with a list of regions, that list is what the role may read, and without regions the task reads region alone."
    }
    precondition {
      condition     = !var.create_bucket || local.bucket_region == var.region
      error_message = "bucket_region differs from region with create_bucket = true: the bucket is created in region. bucket_region names the Region of a bucket created elsewhere (create_bucket = false)."
    }
    precondition {
      condition     = !local.use_kms || try(split(":", var.kms_key_arn)[3], "") == local.bucket_region
      error_message = "kms_key_arn is not a key of the bucket's Region (bucket_region, or region): S3 encrypts with a KMS key of the bucket's Region, for writers from any Region. Name that key (with a multi-Region key, its primary or replica in the bucket's Region); a key of the writer's Region does not serve."
    }
  }
}

resource "aws_ecs_service" "archiver" {
  name            = var.name
  cluster         = var.cluster_arn
  task_definition = aws_ecs_task_definition.archiver.arn
  desired_count   = var.desired_count
  launch_type     = "FARGATE"

  # Rolling deploys: new tasks start before old ones stop; the old ones hand
  # their leases over on SIGTERM.
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = var.security_group_ids
    assign_public_ip = false
  }
}
