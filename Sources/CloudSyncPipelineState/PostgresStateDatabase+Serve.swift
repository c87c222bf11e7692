import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres
import Foundation

/// What `cloudsync serve` keeps in the shared state: the slots hosts claim, so each runs once across them, and the
/// runs' reports, so any host can show any host's.
extension PostgresStateDatabase {
    /// How long a claimed slot is remembered: long past any slot a host could still be about to fire.
    static let slotMemory = "7 days"

    /// Claims the slot at `slotMs` (milliseconds since 1970) for `host`; true when this call got it.
    ///
    /// False when another host had it. Claims older than `slotMemory` are forgotten on the way.
    public func claimSlot(_ slotMs: Int64, host: String) throws(CloudSyncError) -> Bool {
        try run { db throws(PostgresError) in
            try db.transaction { () throws(PostgresError) -> Bool in
                let claimed = try db.execute(
                    "INSERT INTO serve_slots (pipeline, slot_ms, host) VALUES ($1, $2, $3) "
                        + "ON CONFLICT (pipeline, slot_ms) DO NOTHING RETURNING slot_ms",
                    [.text(pipeline), .integer(slotMs), .text(host)])
                if !claimed.rows.isEmpty {
                    try db.execute(
                        "DELETE FROM serve_slots WHERE pipeline = $1 AND claimed_at < now() - interval '\(Self.slotMemory)'",
                        [.text(pipeline)])
                }
                return !claimed.rows.isEmpty
            }
        }
    }

    /// Keeps `json`, the report of run `id`, with its history row (recorded before).
    public func keepReport(_ json: String, of id: String) throws(CloudSyncError) {
        guard !isReadOnly else { return }
        try run { db throws(PostgresError) in
            try db.execute(
                "UPDATE runs SET report_json = $3 WHERE pipeline = $1 AND id = $2",
                [.text(pipeline), .text(id), .text(json)])
        }
    }

    /// The reports kept with the last `limit` runs that have one, newest first.
    public func recentReports(limit: Int) throws(CloudSyncError) -> [Data] {
        guard isSetUp else { return [] }
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT report_json FROM runs WHERE pipeline = $1 AND report_json IS NOT NULL "
                    + "ORDER BY started_at DESC, recorded DESC LIMIT $2", [.text(pipeline), .integer(Int64(limit))])
        }
        return result.rows.compactMap { $0[0].text.map { Data($0.utf8) } }
    }

    /// The report of run `id` as kept with its history; nil when none is.
    public func report(of id: String) throws(CloudSyncError) -> Data? {
        guard isSetUp else { return nil }
        let result = try run { db throws(PostgresError) in
            try db.execute(
                "SELECT report_json FROM runs WHERE pipeline = $1 AND id = $2", [.text(pipeline), .text(id)])
        }
        return result.rows.first?[0].text.map { Data($0.utf8) }
    }
}
