# Remote state: where Terraform keeps what it created. Local state (the
# default, terraform.tfstate in this directory) is lost with the machine
# and cannot be shared; keep it in S3 instead. When this directory is the
# root module (deploy/README.md, section 3), remove the leading "# " of
# the block below, fill in a bucket made for state (versioned, encrypted,
# public access blocked; not the archive bucket) and run terraform init
# (-migrate-state moves an existing local state there). A configuration
# that calls this module (examples/) has its own backend; a backend block
# here would be ignored then, with a warning.
#
# Locking keeps two applies apart. Terraform 1.10 or later locks with a
# lock file beside the state (use_lockfile: S3's conditional writes, no
# table). Before 1.10, use a DynamoDB table instead: hash key LockID
# (string), PAY_PER_REQUEST; drop use_lockfile and name it in
# dynamodb_table (deprecated from 1.11 on, where use_lockfile replaces it).
#
# terraform {
#   backend "s3" {
#     bucket       = "example-terraform-state"
#     key          = "ttl-archiver/eu-west-1/terraform.tfstate"
#     region       = "eu-west-1"
#     encrypt      = true
#     use_lockfile = true
#     # dynamodb_table = "terraform-locks"
#   }
# }
