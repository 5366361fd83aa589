# Plans of the module against a mock AWS provider: nothing reaches AWS.
# Run by deploy/terraform_test.go (go test ./deploy) where terraform and a
# local copy of the hashicorp/aws provider are at hand, or by hand:
# terraform init -backend=false && terraform test.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
}

variables {
  region             = "eu-west-1"
  source_table       = "SessionData"
  bucket_name        = "example-ttl-archive"
  image              = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/ttl-archiver:v1.0.0"
  cluster_arn        = "arn:aws:ecs:eu-west-1:123456789012:cluster/main"
  subnet_ids         = ["subnet-aaa"]
  security_group_ids = ["sg-archiver"]
}

run "defaults" {
  command = plan
  assert {
    condition     = length(aws_s3_bucket.archive) == 1 && length(aws_s3_bucket_policy.archive) == 1
    error_message = "the module does not create the bucket by default"
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_SINK"] == "s3://example-ttl-archive/ttl-archive/?sse=AES256"
    error_message = "ARCHIVER_SINK is not the archive bucket with SSE-S3"
  }
  assert {
    condition     = length(aws_ecr_repository.archiver) == 0 && length(aws_ecr_lifecycle_policy.archiver) == 0 && output.ecr_repository_url == null
    error_message = "the module creates an ECR repository without create_ecr_repository"
  }
}

# The image's repository: immutable tags (a tag is one build), scanned on
# push, the last ecr_keep_images tagged images kept.
run "ecr_repository" {
  command = plan
  variables {
    create_ecr_repository = true
    ecr_keep_images       = 12
  }
  assert {
    condition     = aws_ecr_repository.archiver[0].name == "ttl-archiver" && aws_ecr_repository.archiver[0].image_tag_mutability == "IMMUTABLE" && aws_ecr_repository.archiver[0].image_scanning_configuration[0].scan_on_push
    error_message = "the ECR repository is not ttl-archiver with immutable tags scanned on push"
  }
  assert {
    condition     = jsondecode(aws_ecr_lifecycle_policy.archiver[0].policy).rules[0].selection == { tagStatus = "tagged", tagPatternList = ["*"], countType = "imageCountMoreThan", countNumber = 12 } && jsondecode(aws_ecr_lifecycle_policy.archiver[0].policy).rules[0].action.type == "expire"
    error_message = "the lifecycle policy does not keep the last ecr_keep_images tagged images"
  }
}

run "refuses_keeping_no_image" {
  command = plan
  variables {
    create_ecr_repository = true
    ecr_keep_images       = 0
  }
  expect_failures = [var.ecr_keep_images]
}

run "kms" {
  command = plan
  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:123456789012:key/k"
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_SINK"] == "s3://example-ttl-archive/ttl-archive/?sse=aws:kms&kms-key-id=arn:aws:kms:eu-west-1:123456789012:key/k"
    error_message = "with kms_key_arn, ARCHIVER_SINK does not name the key"
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_DEAD_LETTER"] == "s3://example-ttl-archive/dead-letter/?sse=aws:kms&kms-key-id=arn:aws:kms:eu-west-1:123456789012:key/k"
    error_message = "with kms_key_arn, ARCHIVER_DEAD_LETTER does not name the key"
  }
}

# A second Region's instance writes to the bucket the first one created.
run "bucket_of_another_region" {
  command = plan
  variables {
    region        = "us-east-1"
    cluster_arn   = "arn:aws:ecs:us-east-1:123456789012:cluster/main"
    create_bucket = false
    bucket_region = "eu-west-1"
    kms_key_arn   = "arn:aws:kms:eu-west-1:123456789012:key/k"
  }
  assert {
    condition     = length(aws_s3_bucket.archive) == 0 && length(aws_s3_bucket_policy.archive) == 0 && length(aws_s3_bucket_lifecycle_configuration.archive) == 0
    error_message = "create_bucket = false still creates bucket resources"
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_SINK"] == "s3://example-ttl-archive/ttl-archive/?sse=aws:kms&kms-key-id=arn:aws:kms:eu-west-1:123456789012:key/k&region=eu-west-1"
    error_message = "the sink does not name the bucket's Region"
  }
  assert {
    condition     = output.bucket_arn == "arn:aws:s3:::example-ttl-archive" && output.bucket_name == "example-ttl-archive"
    error_message = "the bucket outputs do not name the existing bucket"
  }
}

run "refuses_a_created_bucket_elsewhere" {
  command = plan
  variables {
    bucket_region = "us-east-1"
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_a_key_of_another_region" {
  command = plan
  variables {
    region        = "us-east-1"
    create_bucket = false
    bucket_region = "eu-west-1"
    kms_key_arn   = "arn:aws:kms:us-east-1:123456789012:key/k"
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_a_bad_bucket_region" {
  command = plan
  variables {
    create_bucket = false
    bucket_region = "Europe"
  }
  expect_failures = [var.bucket_region]
}

# One deployment reads the replicas of two more Regions: the task role may
# describe the table and read its stream in each, the lease table and the
# bucket stay region's.
run "regions_list" {
  command = plan
  variables {
    regions = ["eu-west-1", "us-east-1", "ap-southeast-2"]
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_REGIONS"] == "eu-west-1,us-east-1,ap-southeast-2"
    error_message = "ARCHIVER_REGIONS is not the regions"
  }
  assert {
    condition     = !contains(keys({ for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }), "ARCHIVER_PER_REGION")
    error_message = "ARCHIVER_PER_REGION is set without per_region"
  }
  assert {
    condition = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceTableMetadata"][0] == [
      "arn:aws:dynamodb:eu-west-1:123456789012:table/SessionData",
      "arn:aws:dynamodb:us-east-1:123456789012:table/SessionData",
      "arn:aws:dynamodb:ap-southeast-2:123456789012:table/SessionData",
    ]
    error_message = "ReadSourceTableMetadata does not name the table in every Region read"
  }
  assert {
    condition = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceStream"][0] == [
      "arn:aws:dynamodb:eu-west-1:123456789012:table/SessionData/stream/*",
      "arn:aws:dynamodb:us-east-1:123456789012:table/SessionData/stream/*",
      "arn:aws:dynamodb:ap-southeast-2:123456789012:table/SessionData/stream/*",
    ]
    error_message = "ReadSourceStream does not name the stream in every Region read"
  }
  assert {
    condition     = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "LeaseAndCheckpointTable"][0] == ["arn:aws:dynamodb:eu-west-1:123456789012:table/ttl-archiver-leases"]
    error_message = "the lease table is granted outside region"
  }
}

# A list without region: region is still described (run checks the table
# there first).
run "regions_elsewhere" {
  command = plan
  variables {
    regions = ["us-east-1"]
  }
  assert {
    condition = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceTableMetadata"][0] == [
      "arn:aws:dynamodb:eu-west-1:123456789012:table/SessionData",
      "arn:aws:dynamodb:us-east-1:123456789012:table/SessionData",
    ]
    error_message = "ReadSourceTableMetadata does not name region and the Region read"
  }
}

run "regions_all" {
  command = plan
  variables {
    regions         = ["all"]
    replica_regions = ["us-east-1", "eu-west-1", "ap-southeast-2"]
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_REGIONS"] == "all"
    error_message = "ARCHIVER_REGIONS is not all"
  }
  assert {
    condition = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceStream"][0] == [
      "arn:aws:dynamodb:eu-west-1:123456789012:table/SessionData/stream/*",
      "arn:aws:dynamodb:us-east-1:123456789012:table/SessionData/stream/*",
      "arn:aws:dynamodb:ap-southeast-2:123456789012:table/SessionData/stream/*",
    ]
    error_message = "ReadSourceStream does not name the stream in region and every replica Region"
  }
}

run "per_region" {
  command = plan
  variables {
    per_region = true
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_PER_REGION"] == "true"
    error_message = "ARCHIVER_PER_REGION is not true"
  }
  assert {
    condition     = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceStream"][0] == ["arn:aws:dynamodb:eu-west-1:123456789012:table/SessionData/stream/*"]
    error_message = "a per-Region archiver may read another Region's stream"
  }
}

run "refuses_regions_with_per_region" {
  command = plan
  variables {
    regions    = ["eu-west-1", "us-east-1"]
    per_region = true
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_all_without_replica_regions" {
  command = plan
  variables {
    regions = ["all"]
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_replica_regions_without_all" {
  command = plan
  variables {
    regions         = ["us-east-1"]
    replica_regions = ["us-east-1"]
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_all_beside_a_region" {
  command = plan
  variables {
    regions = ["all", "us-east-1"]
  }
  expect_failures = [var.regions]
}

run "refuses_a_region_twice" {
  command = plan
  variables {
    regions = ["us-east-1", "us-east-1"]
  }
  expect_failures = [var.regions]
}

# A global table under past-ttl (the sweeper's) is archived in one Region.
run "refuses_past_ttl_over_several_regions" {
  command = plan
  variables {
    regions      = ["eu-west-1", "us-east-1"]
    expired_when = "past-ttl"
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_the_sweeper_over_all_regions" {
  command = plan
  variables {
    regions         = ["all"]
    replica_regions = ["us-east-1"]
    sweeper_count   = 2
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_past_ttl_per_region" {
  command = plan
  variables {
    per_region   = true
    expired_when = "past-ttl"
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_the_sweeper_per_region" {
  command = plan
  variables {
    per_region    = true
    sweeper_count = 2
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

# One past-ttl archiver in one Region, beside the sweeper, archives every
# Region's expiries; reading one named Region is one Region too.
run "past_ttl_in_one_region" {
  command = plan
  variables {
    sweeper_count = 2
    regions       = ["us-east-1"]
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_EXPIRED_WHEN"] == "past-ttl"
    error_message = "the sweeper's archiver does not run with past-ttl"
  }
}

# The other Regions' replicated expiries count apart
# (archiver_replicated_ttl_deletes_total): a per-Region archiver keeps
# every alarm.
run "alarms_of_a_global_deployment" {
  command = plan
  variables {
    per_region = true
  }
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.archiver) == 8 && contains(keys(aws_cloudwatch_metric_alarm.archiver), "ttl-passed-user-deletes")
    error_message = "a per-Region archiver lacks an alarm"
  }
}

# One table alone: the tag statement is dropped (least privilege).
run "no_tag_discovery_without_tables_tagged" {
  command = plan
  assert {
    condition     = length([for s in jsondecode(output.task_policy_json).Statement : s if s.Sid == "FindTaggedTables"]) == 0
    error_message = "the task may list every table's tags without tables_tagged"
  }
}

# Every table tagged archive=yes whose name begins with app-: the tags in
# ARCHIVER_TABLES_TAGGED, no ARCHIVER_TABLE, the source statements on
# table/app-* (the task role's and the operator's), tag discovery granted,
# and alarms over every table (Metrics Insights).
run "tables_tagged" {
  command = plan
  variables {
    source_table            = ""
    tables_tagged           = { archive = "yes", team = "payments" }
    tagged_table_prefix     = "app-"
    tables_refresh          = "1m"
    operator_principal_arns = ["arn:aws:iam::123456789012:role/oncall"]
    restore_table           = "app-restored"
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_TABLES_TAGGED"] == "archive=yes,team=payments"
    error_message = "ARCHIVER_TABLES_TAGGED is not the tags as KEY=VALUE pairs"
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_TABLES_REFRESH"] == "1m"
    error_message = "ARCHIVER_TABLES_REFRESH is not tables_refresh"
  }
  assert {
    condition     = !contains(keys({ for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }), "ARCHIVER_TABLE")
    error_message = "ARCHIVER_TABLE is set without source_table"
  }
  assert {
    condition     = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceStream"][0] == ["arn:aws:dynamodb:eu-west-1:123456789012:table/app-*/stream/*"]
    error_message = "ReadSourceStream does not name the streams of the prefix's tables"
  }
  assert {
    condition     = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceTableMetadata"][0] == ["arn:aws:dynamodb:eu-west-1:123456789012:table/app-*"]
    error_message = "ReadSourceTableMetadata does not name the prefix's tables"
  }
  assert {
    condition     = length([for s in jsondecode(output.task_policy_json).Statement : s if s.Sid == "FindTaggedTables"]) == 1
    error_message = "the task may not list tables and their tags"
  }
  assert {
    condition     = [for s in jsondecode(aws_iam_role_policy.operator[0].policy).Statement : s.Resource if s.Sid == "VerifyReadSourceStream"][0] == ["arn:aws:dynamodb:eu-west-1:123456789012:table/app-*/stream/*"]
    error_message = "the operator's verify cannot read the tagged tables' streams"
  }
  assert {
    condition     = aws_cloudwatch_metric_alarm.archiver["iterator-age"].alarm_name == "ttl-archiver-tagged-iterator-age" && aws_cloudwatch_metric_alarm.archiver["iterator-age"].metric_name == null
    error_message = "the alarms are not named for the tagged tables, or still name one metric"
  }
  assert {
    condition     = one(aws_cloudwatch_metric_alarm.archiver["iterator-age"].metric_query).expression == "SELECT MAX(archiver_shard_iterator_age_seconds) FROM SCHEMA(\"TTLArchiver\", \"table\")" && one(aws_cloudwatch_metric_alarm.archiver["dead-lettered-records"].metric_query).expression == "SELECT SUM(archiver_dead_lettered_records_total) FROM SCHEMA(\"TTLArchiver\", \"table\")"
    error_message = "the alarms do not query every table's series"
  }
}

# source_table and the tagged tables together: both names in IAM.
run "tables_tagged_beside_source_table" {
  command = plan
  variables {
    tables_tagged = { archive = "yes" }
  }
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.archiver.container_definitions)[0].environment : e.name => e.value }["ARCHIVER_TABLE"] == "SessionData"
    error_message = "ARCHIVER_TABLE is lost beside tables_tagged"
  }
  assert {
    condition = [for s in jsondecode(output.task_policy_json).Statement : s.Resource if s.Sid == "ReadSourceStream"][0] == [
      "arn:aws:dynamodb:eu-west-1:123456789012:table/SessionData/stream/*",
      "arn:aws:dynamodb:eu-west-1:123456789012:table/*/stream/*",
    ]
    error_message = "ReadSourceStream does not name source_table's stream and every tagged table's"
  }
}

run "refuses_no_table" {
  command = plan
  variables {
    source_table = ""
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_tables_tagged_with_regions" {
  command = plan
  variables {
    tables_tagged = { archive = "yes" }
    regions       = ["eu-west-1", "us-east-1"]
  }
  expect_failures = [aws_ecs_task_definition.archiver]
}

run "refuses_the_sweeper_without_source_table" {
  command = plan
  variables {
    source_table  = ""
    tables_tagged = { archive = "yes" }
    sweeper_count = 1
  }
  expect_failures = [aws_iam_role.sweep_task]
}

run "refuses_athena_without_tables" {
  command = plan
  variables {
    source_table   = ""
    tables_tagged  = { archive = "yes" }
    athena_enabled = true
  }
  expect_failures = [aws_glue_catalog_table.archive]
}

run "refuses_restore_without_table" {
  command = plan
  variables {
    source_table            = ""
    tables_tagged           = { archive = "yes" }
    operator_principal_arns = ["arn:aws:iam::123456789012:role/oncall"]
  }
  expect_failures = [aws_iam_role_policy.operator]
}

run "refuses_a_tag_with_a_comma" {
  command = plan
  variables {
    tables_tagged = { "a,b" = "yes" }
  }
  expect_failures = [var.tables_tagged]
}
