import CloudSync
import CloudSyncYAML
import Foundation

/// Reading `schedule`: when the pipeline is due.
extension PipelineReader {
    /// `schedule: { cron: "30 2 * * *", timezone: Europe/Paris, jitter: 5m, catchUp: true }` or
    /// `schedule: { every: 30s }`: exactly one of `cron` and `every`; the time zone (IANA, default UTC) only with
    /// `cron`; durations as `90s`, `5m`, `1h30m`.
    func scheduleSpec(_ node: YAMLNode) -> PipelineSchedule? {
        guard let fields = mapping(node, "schedule", ["cron", "timezone", "every", "jitter", "catchUp"]) else {
            return nil
        }
        let cronNode = fields["cron"]
        let everyNode = fields["every"]
        var slots: PipelineSchedule.Slots?
        switch (cronNode, everyNode) {
        case (nil, nil):
            diagnostics.error(
                "`schedule` needs `cron` (such as \"30 2 * * *\") or `every` (such as 30s)", at: node.mark)
        case (.some, .some(let every)):
            diagnostics.error(
                "`schedule` takes `cron` or `every`, not both; keep the one that says when it should run",
                at: every.mark)
        case (let cron?, nil):
            var zone = TimeZone(identifier: "UTC")!
            if let zoneNode = fields["timezone"], let name = fields.scalarText(zoneNode, field: "timezone") {
                if let named = TimeZone(identifier: name.value) {
                    zone = named
                } else {
                    diagnostics.error(
                        "\(name.quoted) is not a time zone this machine knows; write an IANA name such as "
                            + "Europe/Paris, America/New_York or UTC", at: zoneNode.mark)
                }
            }
            if let text = fields.scalarText(cron, field: "cron") {
                do throws(CronExpression.ParseError) {
                    slots = .cron(try CronExpression(parsing: text.value), zone)
                } catch {
                    diagnostics.error("`cron`: \(error.message)", at: cron.mark)
                }
            }
        case (nil, let every?):
            if let zoneNode = fields["timezone"] {
                diagnostics.error(
                    "`timezone` applies to `cron` only: `every` counts from the same instant on every machine",
                    at: zoneNode.mark)
            }
            if let interval = duration(fields, every, field: "every", minimum: 1000) {
                slots = .every(milliseconds: interval)
            }
        }
        var jitter: Int64 = 0
        if let jitterNode = fields["jitter"] {
            jitter = duration(fields, jitterNode, field: "jitter", minimum: 0) ?? 0
            if case .every(let interval)? = slots, jitter >= interval {
                diagnostics.error(
                    "`jitter` (\(DurationText.format(milliseconds: jitter))) must be shorter than `every` "
                        + "(\(DurationText.format(milliseconds: interval))): a run delayed past the next slot would "
                        + "skip it", at: jitterNode.mark)
            }
        }
        let catchUp = fields.boolean("catchUp") ?? false
        return slots.map { PipelineSchedule(slots: $0, jitterMilliseconds: jitter, catchUp: catchUp) }
    }

    /// A duration field's milliseconds, at least `minimum`; nil (and an error at the field) otherwise.
    func duration(_ fields: MappingReader, _ node: YAMLNode, field: String, minimum: Int64) -> Int64? {
        guard let text = fields.scalarText(node, field: field) else { return nil }
        guard let milliseconds = DurationText.milliseconds(text.value), milliseconds >= minimum else {
            diagnostics.error(
                "`\(field)` must be a duration such as 30s, 5m or 1h30m"
                    + (minimum > 0 ? " of at least \(DurationText.format(milliseconds: minimum))" : "")
                    + "; found \(text.quoted)", at: node.mark)
            return nil
        }
        return milliseconds
    }
}
