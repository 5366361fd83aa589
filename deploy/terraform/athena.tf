# --- Athena over the archive (optional) --------------------------------------
# A Glue database and table over the archive (deploy/athena/table.sql, with
# partition projection: nothing to crawl, no partitions to add), a
# workgroup for analysts, and the views of deploy/athena/views/ as named
# queries: run each once in the workgroup (in file order) to create the
# views. Set athena_enabled = true to create them.

variable "athena_enabled" {
  description = "Create the Glue table, the Athena workgroup and the views' named queries over the archive."
  type        = bool
  default     = false
}

variable "athena_database" {
  description = "Glue database that holds the archive's table (ttl_archive)."
  type        = string
  default     = "ttl_archive"
}

variable "athena_tables" {
  description = "DynamoDB tables archived under archive_prefix besides source_table (the projection's table values: a table not listed is not seen by queries). With tables_tagged, list the tagged tables here: Athena cannot learn them from the tags."
  type        = list(string)
  default     = []
}

variable "athena_first_day" {
  description = "First day (YYYY-MM-DD, UTC) the table's dt projection covers; older partitions are not read."
  type        = string
  default     = "2024-01-01"
}

locals {
  athena_count    = var.athena_enabled ? 1 : 0
  archive_url     = "s3://${var.bucket_name}/${var.archive_prefix}"
  athena_results  = "s3://${var.bucket_name}/athena-results/"
  athena_views    = var.athena_enabled ? fileset("${path.module}/../athena/views", "*.sql") : []
  projected_hours = join(",", [for h in range(24) : format("%02d", h)])
}

resource "aws_glue_catalog_database" "archive" {
  count = local.athena_count
  name  = var.athena_database
}

# The columns and projection of deploy/athena/table.sql (TestAthenaTerraform
# keeps the two equal), except that `table` is an enum of the archived
# tables here, so queries need not name one.
resource "aws_glue_catalog_table" "archive" {
  count         = local.athena_count
  name          = "ttl_archive"
  database_name = aws_glue_catalog_database.archive[0].name
  table_type    = "EXTERNAL_TABLE"

  parameters = {
    "EXTERNAL"                    = "TRUE"
    "classification"              = "json"
    "projection.enabled"          = "true"
    "projection.table.type"       = "enum"
    "projection.table.values"     = join(",", distinct(compact(concat([var.source_table], var.athena_tables))))
    "projection.kind.type"        = "enum"
    "projection.kind.values"      = "expired,deleted,inserted,modified"
    "projection.dt.type"          = "date"
    "projection.dt.format"        = "yyyy-MM-dd"
    "projection.dt.range"         = "${var.athena_first_day},NOW"
    "projection.dt.interval"      = "1"
    "projection.dt.interval.unit" = "DAYS"
    "projection.hr.type"          = "enum"
    "projection.hr.values"        = local.projected_hours
    "storage.location.template"   = "${local.archive_url}table=$${table}/kind=$${kind}/dt=$${dt}/hr=$${hr}/"
  }

  partition_keys {
    name = "table"
    type = "string"
  }
  partition_keys {
    name = "kind"
    type = "string"
  }
  partition_keys {
    name = "dt"
    type = "string"
  }
  partition_keys {
    name = "hr"
    type = "string"
  }

  storage_descriptor {
    location      = local.archive_url
    input_format  = "org.apache.hadoop.mapred.TextInputFormat"
    output_format = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"

    ser_de_info {
      serialization_library = "org.openx.data.jsonserde.JsonSerDe"
    }

    columns {
      name = "item"
      type = "string"
    }
    columns {
      name = "keys"
      type = "map<string,struct<s:string,n:string,b:string>>"
    }
    columns {
      name = "oldimage"
      type = "string"
    }
    columns {
      name = "metadata"
      type = "struct<kind:string,table:string,eventid:string,eventname:string,sequencenumber:string,shardid:string,streamarn:string,region:string,approximatecreationdatetime:string,deletiontime:string,sizebytes:bigint,ttlattribute:string,ttlvalue:string,ttltime:string,ttllagseconds:double,deletedby:string,image:string>"
    }
  }

  lifecycle {
    precondition {
      condition     = length(compact(concat([var.source_table], var.athena_tables))) > 0
      error_message = "athena_enabled with tables_tagged and no source_table: list the tagged tables in athena_tables (the table projection's values)."
    }
  }
}

resource "aws_athena_workgroup" "archive" {
  count         = local.athena_count
  name          = var.name
  force_destroy = true

  configuration {
    enforce_workgroup_configuration = true
    engine_version {
      selected_engine_version = "Athena engine version 3"
    }
    result_configuration {
      output_location = local.athena_results
      encryption_configuration {
        encryption_option = local.use_kms ? "SSE_KMS" : "SSE_S3"
        kms_key_arn       = local.use_kms ? var.kms_key_arn : null
      }
    }
  }
}

# One named query per view, named after its file (01_archive_events.sql
# creates archive_events); the views read the Glue table above.
resource "aws_athena_named_query" "views" {
  for_each  = local.athena_views
  name      = "${var.name}-${trimsuffix(each.value, ".sql")}"
  workgroup = aws_athena_workgroup.archive[0].id
  database  = aws_glue_catalog_database.archive[0].name
  query     = file("${path.module}/../athena/views/${each.value}")
}

output "athena_workgroup" {
  description = "Athena workgroup for queries over the archive (empty when athena_enabled is false)."
  value       = var.athena_enabled ? aws_athena_workgroup.archive[0].name : ""
}
