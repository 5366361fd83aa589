# --- Container registry (optional) ----------------------------------------
# create_ecr_repository = true: the ECR repository the image is pushed to
# (deploy/README.md, section 2), named like everything else (var.name).
# Tags are immutable, as each names one build (the version make image
# stamps): a tag pushed again with other contents is refused. Every push
# is scanned (basic scanning). The execution role pulls from it with
# AmazonECSTaskExecutionRolePolicy (ecr:GetAuthorizationToken,
# BatchCheckLayerAvailability, GetDownloadUrlForLayer, BatchGetImage on
# any repository of the account), so nothing is added to it here.

locals {
  ecr_count = var.create_ecr_repository ? 1 : 0
}

resource "aws_ecr_repository" "archiver" {
  count                = local.ecr_count
  name                 = var.name
  image_tag_mutability = "IMMUTABLE"
  image_scanning_configuration {
    scan_on_push = true
  }
}

# Keeps the last ecr_keep_images tagged images (one per version: the image
# index make image pushes under its tag). The rule counts tagged images
# only: the per-platform manifests an index names are untagged, and a
# count over them could expire a platform of an image still in use.
resource "aws_ecr_lifecycle_policy" "archiver" {
  count      = local.ecr_count
  repository = aws_ecr_repository.archiver[0].name
  policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "Keep the last ${var.ecr_keep_images} tagged images"
      selection = {
        tagStatus      = "tagged"
        tagPatternList = ["*"]
        countType      = "imageCountMoreThan"
        countNumber    = var.ecr_keep_images
      }
      action = { type = "expire" }
    }]
  })
}
