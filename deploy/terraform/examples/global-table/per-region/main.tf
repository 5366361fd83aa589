# A global table archived by one archiver per Region (deploy/README.md,
# section 9, "Global tables"): the module applied once in each Region of
# the table's replicas, each with per_region = true. Each reads its own
# Region's stream, whose REMOVEs marked as DynamoDB's are the expiries that
# Region's TTL performed, keeps its own checkpoints in its own lease table,
# and writes to one bucket in eu-west-1: every Region's archive lands under
# one prefix (each object's name begins with its Region, each line's
# Metadata.region names it).
#
# Each instance gets its Region through region: the module configures its
# own AWS provider from it, and a module holding a provider block takes no
# providers argument (nor count, for_each or depends_on), hence one block
# per Region. The provider below is the bucket Region's, for the key.
#
# What each task role may do (the module's task policy, deploy/iam-policy.json
# filled in for its Region): describe the table and read the stream in its
# own Region only, use its own lease table, write under the prefix of the
# one bucket, and use the one KMS key. Apply the whole, then scale: a
# Region's tasks share its shards through their lease table.

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
  account       = "111122223333"
  table         = "SessionData"
  bucket        = "example-ttl-archive"
  bucket_region = "eu-west-1"
  # Where each Region's tasks run: an ECS cluster, private subnets with a
  # NAT gateway (an S3 gateway endpoint serves its own Region's buckets
  # only, so the other Regions reach the bucket through NAT), and a
  # security group allowing HTTPS out. The image is pushed to each
  # Region's registry (or replicated by ECR).
  ecs = {
    "eu-west-1" = {
      cluster_arn        = "arn:aws:ecs:eu-west-1:111122223333:cluster/main"
      subnet_ids         = ["subnet-euw1a", "subnet-euw1b"]
      security_group_ids = ["sg-archiver-euw1"]
    }
    "us-east-1" = {
      cluster_arn        = "arn:aws:ecs:us-east-1:111122223333:cluster/main"
      subnet_ids         = ["subnet-use1a", "subnet-use1b"]
      security_group_ids = ["sg-archiver-use1"]
    }
    "ap-southeast-2" = {
      cluster_arn        = "arn:aws:ecs:ap-southeast-2:111122223333:cluster/main"
      subnet_ids         = ["subnet-apse2a", "subnet-apse2b"]
      security_group_ids = ["sg-archiver-apse2"]
    }
  }
}

provider "aws" {
  region = local.bucket_region
}

# SSE-KMS: S3 encrypts an object with a key of the bucket's Region,
# whichever Region the writer is in, so every instance names this key
# (kms_key_arn); a key of the writer's own Region would be refused. Its
# default key policy lets IAM policies grant it, and each instance's task
# role is granted kms:GenerateDataKey and kms:Decrypt on it.
resource "aws_kms_key" "archive" {
  description         = "TTL archive of ${local.table}"
  enable_key_rotation = true
}

# eu-west-1 creates the bucket (encryption, lifecycle, TLS-only policy) and
# the Athena table over it, and archives eu-west-1's expiries.
module "archiver_eu_west_1" {
  source = "../../.."

  # IAM role names are global: every instance has a name of its own.
  name               = "ttl-archiver-eu-west-1"
  region             = "eu-west-1"
  source_table       = local.table
  per_region         = true
  bucket_name        = local.bucket
  kms_key_arn        = aws_kms_key.archive.arn
  athena_enabled     = true
  image              = "${local.account}.dkr.ecr.eu-west-1.amazonaws.com/ttl-archiver:v1.0.0"
  cluster_arn        = local.ecs["eu-west-1"].cluster_arn
  subnet_ids         = local.ecs["eu-west-1"].subnet_ids
  security_group_ids = local.ecs["eu-west-1"].security_group_ids
}

# us-east-1 writes to the eu-west-1 bucket: every object it writes crosses
# Regions (inter-Region data transfer out of us-east-1). bucket_name comes
# from the first instance, so this one is created after the bucket.
module "archiver_us_east_1" {
  source = "../../.."

  name               = "ttl-archiver-us-east-1"
  region             = "us-east-1"
  source_table       = local.table
  per_region         = true
  bucket_name        = module.archiver_eu_west_1.bucket_name
  create_bucket      = false
  bucket_region      = local.bucket_region
  kms_key_arn        = aws_kms_key.archive.arn
  image              = "${local.account}.dkr.ecr.us-east-1.amazonaws.com/ttl-archiver:v1.0.0"
  cluster_arn        = local.ecs["us-east-1"].cluster_arn
  subnet_ids         = local.ecs["us-east-1"].subnet_ids
  security_group_ids = local.ecs["us-east-1"].security_group_ids
}

module "archiver_ap_southeast_2" {
  source = "../../.."

  name               = "ttl-archiver-ap-southeast-2"
  region             = "ap-southeast-2"
  source_table       = local.table
  per_region         = true
  bucket_name        = module.archiver_eu_west_1.bucket_name
  create_bucket      = false
  bucket_region      = local.bucket_region
  kms_key_arn        = aws_kms_key.archive.arn
  image              = "${local.account}.dkr.ecr.ap-southeast-2.amazonaws.com/ttl-archiver:v1.0.0"
  cluster_arn        = local.ecs["ap-southeast-2"].cluster_arn
  subnet_ids         = local.ecs["ap-southeast-2"].subnet_ids
  security_group_ids = local.ecs["ap-southeast-2"].security_group_ids
}

output "task_policies" {
  description = "Each Region's task role policy: its own table, stream and lease table, the one bucket and key."
  value = {
    "eu-west-1"      = module.archiver_eu_west_1.task_policy_json
    "us-east-1"      = module.archiver_us_east_1.task_policy_json
    "ap-southeast-2" = module.archiver_ap_southeast_2.task_policy_json
  }
}
