/// Keys a report names by category (`check`'s differences, `mirror`'s deletions): the first
/// ``KeyLists/limit`` of each, the rest only counted in the job's counts.
package struct KeyLists {
    package init() {}

    package static let limit = 100
    package private(set) var lists: [String: [String]] = [:]

    package mutating func add(_ key: String, to count: JobCount) {
        if lists[count.name, default: []].count < Self.limit { lists[count.name, default: []].append(key) }
    }
}
