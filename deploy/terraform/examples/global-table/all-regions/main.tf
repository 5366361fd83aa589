# A global table archived by one deployment that reads every replica's
# stream (deploy/README.md, section 9, "Global tables"): the module applied
# once, in eu-west-1, with regions = ["all"]. Each Region's stream marks as
# DynamoDB's the expiries that Region's TTL performed, so reading every
# replica archives every expiry once. The tasks run in eu-west-1 and read
# the other Regions' streams across Regions: each GetRecords answer from
# us-east-1 or ap-southeast-2 is data transferred out of that Region. The
# lease table (checkpoints of every Region's shards, keyed by stream ARN),
# the bucket and the alarms are eu-west-1's.
#
# regions = ["all"] reads every Region the table's description lists at
# start-up; IAM cannot follow that, so replica_regions lists them here,
# from the table's description as Terraform reads it (a replica added
# later needs a new apply, or its Region is refused to the task). A fixed
# list instead: regions = ["eu-west-1", "us-east-1", "ap-southeast-2"].
#
# What the task role may do (the module's task policy): DescribeTable and
# DescribeTimeToLive on the table, and DescribeStream, GetRecords,
# GetShardIterator and ListStreams on its streams, in eu-west-1 and in each
# replica Region (one Resource per Region in the ReadSourceTableMetadata
# and ReadSourceStream statements); the lease table, the bucket prefix and
# the key in eu-west-1 only.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
  }
}

locals {
  account = "111122223333"
  region  = "eu-west-1"
  table   = "SessionData"
}

provider "aws" {
  region = local.region
}

# The table's replicas, as DescribeTable in eu-west-1 lists them.
data "aws_dynamodb_table" "source" {
  name = local.table
}

module "archiver" {
  source = "../../.."

  region             = local.region
  source_table       = local.table
  regions            = ["all"]
  replica_regions    = sort([for r in data.aws_dynamodb_table.source.replica : r.region_name])
  bucket_name        = "example-ttl-archive"
  image              = "${local.account}.dkr.ecr.eu-west-1.amazonaws.com/ttl-archiver:v1.0.0"
  cluster_arn        = "arn:aws:ecs:eu-west-1:${local.account}:cluster/main"
  subnet_ids         = ["subnet-aaa", "subnet-bbb"]
  security_group_ids = ["sg-archiver"]
}

output "task_policy" {
  description = "The task role's policy: the source table and its streams in every replica Region."
  value       = module.archiver.task_policy_json
}
