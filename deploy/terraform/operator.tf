# The operator's role (`archiver restore`, `replay` and `verify`, run by
# hand): deploy/iam-policy-operator.json itself, filled in here. Off unless
# operator_principal_arns names who may assume it. The replay statements
# are kept only with a replay_bucket, the KMS ones only with a key.

variable "operator_principal_arns" {
  description = "IAM principals (users or roles) that may assume the operator role; empty: no operator role."
  type        = list(string)
  default     = []
}

variable "restore_table" {
  description = "The table archiver restore writes to (default: source_table; required with tables_tagged and no source_table)."
  type        = string
  default     = ""
}

variable "replay_bucket" {
  description = "Bucket archiver replay may write to (empty: no replay into S3)."
  type        = string
  default     = ""
}

variable "replay_prefix" {
  description = "Key prefix under replay_bucket archiver replay may write to."
  type        = string
  default     = "replay/"
}

variable "replay_kms_key_arn" {
  description = "KMS key of the replay bucket's SSE-KMS objects (empty: none)."
  type        = string
  default     = ""
}

locals {
  operator = length(var.operator_principal_arns) > 0 ? 1 : 0

  operator_vars = {
    partition          = data.aws_partition.current.partition
    region             = var.region
    account_id         = data.aws_caller_identity.current.account_id
    bucket             = var.bucket_name
    prefix             = var.archive_prefix
    kms_key_arn        = var.kms_key_arn
    restore_table      = var.restore_table != "" ? var.restore_table : var.source_table
    source_table       = try(local.source_tables[0], "")
    replay_bucket      = var.replay_bucket
    replay_prefix      = var.replay_prefix
    replay_kms_key_arn = var.replay_kms_key_arn
  }
  operator_policy_template = jsondecode(templatefile("${path.module}/../iam-policy-operator.json", local.operator_vars))
  # verify reads the source tables' streams: its statements take the
  # Resource of every name of source_tables (main.tf), as the task's do.
  operator_by_table   = [for t in local.source_tables : jsondecode(templatefile("${path.module}/../iam-policy-operator.json", merge(local.operator_vars, { source_table = t })))]
  operator_source_sid = ["VerifyReadSourceTable", "VerifyReadSourceStream"]
  operator_drop = concat(
    local.use_kms ? [] : ["DecryptArchiveWithKMS"],
    var.replay_bucket != "" ? [] : ["ReplayWriteArchive", "ReplayEncryptWithKMS"],
    var.replay_kms_key_arn != "" ? [] : ["ReplayEncryptWithKMS"]
  )
  operator_policy = jsonencode(merge(local.operator_policy_template, {
    Statement = [for i, s in local.operator_policy_template.Statement : merge(s, {
      Resource = contains(local.operator_source_sid, s.Sid) ? flatten([for p in local.operator_by_table : p.Statement[i].Resource]) : flatten([s.Resource])
    }) if !contains(local.operator_drop, s.Sid)]
  }))
}

data "aws_iam_policy_document" "operator_assume" {
  count = local.operator
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "AWS"
      identifiers = var.operator_principal_arns
    }
  }
}

resource "aws_iam_role" "operator" {
  count              = local.operator
  name               = "${var.name}-operator"
  assume_role_policy = data.aws_iam_policy_document.operator_assume[0].json
}

resource "aws_iam_role_policy" "operator" {
  count  = local.operator
  name   = "${var.name}-operator"
  role   = aws_iam_role.operator[0].id
  policy = local.operator_policy

  lifecycle {
    precondition {
      condition     = var.restore_table != "" || var.source_table != ""
      error_message = "With tables_tagged and no source_table, name the table archiver restore writes to: restore_table."
    }
  }
}

output "operator_role_arn" {
  description = "Role for archiver restore, replay and verify (deploy/iam-policy-operator.json); empty without operator_principal_arns."
  value       = local.operator == 1 ? aws_iam_role.operator[0].arn : ""
}
