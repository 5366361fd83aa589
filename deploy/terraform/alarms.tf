# CloudWatch alarms on the metrics the archiver writes as embedded metric
# format documents to its log group (ARCHIVER_METRICS=emf, namespace
# TTLArchiver; internal/ops/emf.go). Every metric is per table: EMF
# publishes per-shard gauges as their maximum over the table's shards, and
# archiver_dead_lettered_records_total also under the table alone. Counters
# arrive as increases per minute, so Sum over a period is the count in it;
# with several tasks, Sum adds and Maximum takes the worst task.

locals {
  alarms_enabled    = var.metrics == "emf"
  metrics_namespace = "TTLArchiver"
  alarm_actions     = var.alarm_sns_topic_arn == "" ? [] : [var.alarm_sns_topic_arn]

  alarms = {
    "oldest-unacked-age" = {
      metric      = "archiver_oldest_unacked_age_seconds"
      statistic   = "Maximum"
      period      = 60
      periods     = 3
      threshold   = var.alarm_oldest_unacked_age_seconds
      missing     = "notBreaching"
      description = "A record has waited too long for its sinks: a sink keeps failing it and no dead-letter sink takes it, or reading is far behind. The checkpoint holds; records are lost when the stream trims them at 24 h."
    }
    "dead-lettered-records" = {
      metric      = "archiver_dead_lettered_records_total"
      statistic   = "Sum"
      period      = 60
      periods     = 1
      threshold   = var.alarm_dead_lettered_records
      missing     = "notBreaching"
      description = "Records went to the dead-letter sink: a sink failed them permanently or for longer than --retry-for, or they could not be decoded. See archiver_dead_lettered_records_total by sink and reason, and the dead-letter destination."
    }
    "dead-letter-failures" = {
      metric      = "archiver_dead_letter_failures_total"
      statistic   = "Sum"
      period      = 300
      periods     = 1
      threshold   = var.alarm_dead_letter_failures
      missing     = "notBreaching"
      description = "The dead-letter sink failed writes. What it was given waits (the checkpoint holds) and is retried; records are lost if this lasts until the stream's 24 h trim."
    }
    "trimmed-gaps" = {
      metric      = "archiver_shard_trimmed_gaps_total"
      statistic   = "Sum"
      period      = 60
      periods     = 1
      threshold   = var.alarm_trimmed_gaps
      missing     = "notBreaching"
      description = "The stream trimmed records before the archiver read them: those expiries are lost."
    }
    "iterator-age" = {
      metric    = "archiver_shard_iterator_age_seconds"
      statistic = "Maximum"
      period    = 300
      periods   = 2
      threshold = var.alarm_iterator_age_seconds
      # No data for 10 minutes means no task is reading: the stream keeps
      # records only 24 h.
      missing     = "breaching"
      description = "Reading is far behind the stream, or no archiver task publishes metrics."
    }
    "reader-failures" = {
      metric      = "archiver_shard_reader_failures_total"
      statistic   = "Sum"
      period      = 900
      periods     = 1
      threshold   = var.alarm_reader_failures
      missing     = "notBreaching"
      description = "Shard readers failed and restart from their stored position; rising without end means a shard cannot go on. See the logs of logger shard."
    }
    "ttl-passed-user-deletes" = {
      metric      = "archiver_ttl_passed_user_deletes_total"
      statistic   = "Sum"
      period      = 900
      periods     = 1
      threshold   = var.alarm_ttl_passed_user_deletes
      missing     = "notBreaching"
      description = "Items were deleted after their TTL without DynamoDB's TTL identity while the archiver runs with --expired-when service: they are archived as deleted, not expired, so a sink taking only expiries misses them. A sweeper (archiver sweep) needs expired_when = past-ttl. On a global table such deletes, mostly the other Regions' expiries replicated here, count in archiver_replicated_ttl_deletes_total instead."
    }
    "records-near-trim" = {
      metric      = "archiver_records_near_trim"
      statistic   = "Maximum"
      period      = 60
      periods     = 1
      threshold   = var.alarm_records_near_trim
      missing     = "notBreaching"
      description = "A shard's oldest unacknowledged record is within 2 h of the stream's 24 h trim: it will be lost unless its sinks acknowledge it (or a dead-letter sink takes it) before then."
    }
  }
}

# With tables_tagged the tables are not known when this is applied: each
# alarm is then a CloudWatch Metrics Insights query over every table's
# series (dimension table alone), SUM or MAX as the statistic says, named
# "tagged" where it would name the table.
locals {
  alarm_scope = local.tagged ? "tagged" : var.source_table
  insights_fn = { Sum = "SUM", Maximum = "MAX" }
}

resource "aws_cloudwatch_metric_alarm" "archiver" {
  for_each = { for k, a in local.alarms : k => a if local.alarms_enabled }

  alarm_name          = "${var.name}-${local.alarm_scope}-${each.key}"
  alarm_description   = each.value.description
  namespace           = local.tagged ? null : local.metrics_namespace
  metric_name         = local.tagged ? null : each.value.metric
  dimensions          = local.tagged ? null : { table = var.source_table }
  statistic           = local.tagged ? null : each.value.statistic
  period              = local.tagged ? null : each.value.period
  evaluation_periods  = each.value.periods
  datapoints_to_alarm = each.value.periods
  threshold           = each.value.threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = each.value.missing
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions

  dynamic "metric_query" {
    for_each = local.tagged ? [each.value] : []
    content {
      id          = "q"
      expression  = "SELECT ${local.insights_fn[metric_query.value.statistic]}(${metric_query.value.metric}) FROM SCHEMA(\"${local.metrics_namespace}\", \"table\")"
      period      = metric_query.value.period
      return_data = true
    }
  }
}
