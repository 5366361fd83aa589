# The sweeper (`archiver sweep`, deploy/README.md section 8): deletes the
# source table's expired items within seconds of their TTL, on the
# expiration-window index. Off unless sweeper_count > 0; two tasks give a
# stand-by (one sweeper per table: the lease in the lease table decides).
# Its task role's policy is deploy/iam-policy-sweep.json itself.

variable "sweeper_count" {
  description = "Tasks running `archiver sweep` on source_table (0: no sweeper; 2: one sweeps, one stands by)."
  type        = number
  default     = 0
}

variable "sweep_index" {
  description = "The table's expiration-window index: hash the window attribute, range the TTL attribute."
  type        = string
  default     = "expirationWindowIndex"
}

variable "sweep_window_attribute" {
  description = "The attribute naming each item's window."
  type        = string
  default     = "expirationWindow"
}

variable "sweep_window" {
  description = "The writers' window length (a Go duration, whole milliseconds)."
  type        = string
  default     = "1m"
}

variable "sweep_window_shards" {
  description = "Index partitions per window (<window>#k), as the writers spread them."
  type        = number
  default     = 1
}

variable "sweep_max_deletes_per_second" {
  description = "Cap on the sweeper's write requests per second (0: no cap)."
  type        = number
  default     = 0
}

locals {
  sweeper = var.sweeper_count > 0 ? 1 : 0
  sweep_policy = templatefile("${path.module}/../iam-policy-sweep.json", {
    partition    = data.aws_partition.current.partition
    region       = var.region
    account_id   = data.aws_caller_identity.current.account_id
    source_table = var.source_table
    sweep_index  = var.sweep_index
    lease_table  = local.lease_table
  })
}

resource "aws_iam_role" "sweep_task" {
  count              = local.sweeper
  name               = "${var.name}-sweep-task"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json

  lifecycle {
    precondition {
      condition     = var.source_table != ""
      error_message = "sweeper_count > 0 needs source_table: the sweeper deletes one table's expired items, and tables_tagged names none."
    }
  }
}

resource "aws_iam_role_policy" "sweep_task" {
  count  = local.sweeper
  name   = "${var.name}-sweeper"
  role   = aws_iam_role.sweep_task[0].id
  policy = local.sweep_policy
}

resource "aws_ecs_task_definition" "sweeper" {
  count                    = local.sweeper
  family                   = "${var.name}-sweep"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 256
  memory                   = 512
  task_role_arn            = aws_iam_role.sweep_task[0].arn
  execution_role_arn       = aws_iam_role.execution.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  container_definitions = jsonencode([{
    name                   = "sweeper"
    image                  = var.image
    essential              = true
    command                = ["sweep"]
    user                   = "65532:65532"
    readonlyRootFilesystem = true
    stopTimeout            = 30
    portMappings           = [{ containerPort = 9090, protocol = "tcp", name = "metrics" }]
    environment = [
      { name = "ARCHIVER_REGION", value = var.region },
      { name = "ARCHIVER_TABLE", value = var.source_table },
      { name = "ARCHIVER_INDEX", value = var.sweep_index },
      { name = "ARCHIVER_WINDOW_ATTRIBUTE", value = var.sweep_window_attribute },
      { name = "ARCHIVER_WINDOW", value = var.sweep_window },
      { name = "ARCHIVER_WINDOW_SHARDS", value = tostring(var.sweep_window_shards) },
      { name = "ARCHIVER_MAX_DELETES_PER_SECOND", value = tostring(var.sweep_max_deletes_per_second) },
      { name = "ARCHIVER_CHECKPOINT", value = "dynamodb://${aws_dynamodb_table.leases.name}" },
      { name = "ARCHIVER_SHUTDOWN_TIMEOUT", value = "25s" },
      { name = "ARCHIVER_LOG_LEVEL", value = var.log_level },
      { name = "ARCHIVER_METRICS", value = var.metrics },
      { name = "ARCHIVER_METRICS_ADDR", value = ":9090" },
    ]
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
        "awslogs-stream-prefix" = "sweeper"
      }
    }
  }])
}

resource "aws_ecs_service" "sweeper" {
  count           = local.sweeper
  name            = "${var.name}-sweep"
  cluster         = var.cluster_arn
  task_definition = aws_ecs_task_definition.sweeper[0].arn
  desired_count   = var.sweeper_count
  launch_type     = "FARGATE"

  # A new task stands by until the old one releases the table on SIGTERM.
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
