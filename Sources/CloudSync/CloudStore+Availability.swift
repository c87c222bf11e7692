extension CloudStore {
    /// Whether the provider `providerID` can serve requests now, and if not, why; probed under the store's deadline.
    ///
    /// An unknown id answers ``UnavailableReason/misconfigured``.
    public func availability(of providerID: String) async -> Availability {
        guard let provider = try? provider(withID: providerID) else {
            return .unavailable(.misconfigured, "no provider with id \(providerID) is configured")
        }
        do {
            return try await deadline(provider) { await provider.availability() }
        } catch {
            return error.code == .timeout
                ? .unavailable(.timedOut, "the availability probe did not answer within the store's timeout")
                : .unavailable(.other, error.message)
        }
    }
}
