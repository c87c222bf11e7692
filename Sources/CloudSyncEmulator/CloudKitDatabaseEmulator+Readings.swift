/// The readings of what CloudKit's documentation leaves open, chosen by name: `cloudsync-emulator --cloudkit-reading
/// NAME=VALUE`.
extension CloudKitDatabaseEmulator.Configuration {
    /// Each reading's name and the values it takes, in the order `--help` lists them.
    public static let readings: [(name: String, values: [String])] = [
        ("missingZone", CloudKitDatabaseEmulator.MissingZoneAnswer.allCases.map(\.rawValue)),
        ("expiredToken", CloudKitDatabaseEmulator.ExpiredTokenAnswer.allCases.map(\.rawValue)),
        ("defaultZoneRecords", CloudKitDatabaseEmulator.DefaultZoneAnswer.allCases.map(\.rawValue)),
        ("existingRecordCode", ["EXISTS", "CONFLICT"]),
        ("emptyDesiredKeys", CloudKitDatabaseEmulator.EmptyDesiredKeysAnswer.allCases.map(\.rawValue)),
    ]

    /// Sets the reading `text` names (`missingZone=perRecord`); an unknown name or value is a usage error naming
    /// the ones there are.
    public mutating func setReading(_ text: String) throws(EmulatorUsageError) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        let names = Self.readings.map(\.name).joined(separator: ", ")
        guard parts.count == 2, let known = Self.readings.first(where: { $0.name == parts[0] }) else {
            throw EmulatorUsageError(
                message: "--cloudkit-reading takes NAME=VALUE, NAME one of \(names); found '\(text)'")
        }
        let value = parts[1]
        guard known.values.contains(value) else {
            throw EmulatorUsageError(
                message: "--cloudkit-reading \(known.name) is one of \(known.values.joined(separator: ", ")); "
                    + "found '\(value)'")
        }
        switch known.name {
        case "missingZone": missingZone = .init(rawValue: value)!
        case "expiredToken": expiredToken = .init(rawValue: value)!
        case "defaultZoneRecords": defaultZoneRecords = .init(rawValue: value)!
        case "emptyDesiredKeys": emptyDesiredKeys = .init(rawValue: value)!
        default: existingRecordCode = value
        }
    }
}
