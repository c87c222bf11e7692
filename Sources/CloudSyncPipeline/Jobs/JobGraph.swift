/// The jobs of a pipeline and what each needs: which to run, in file order, for a selection by name.
///
/// The loader only accepts a `needs` naming a job declared earlier, so file order is always an order in which every
/// job comes after the jobs it needs, and the graph has no cycle.
public struct JobGraph: Sendable {
    public let jobs: [JobSpec]

    /// The graph of `jobs`, in file order.
    public init(_ jobs: [JobSpec]) { self.jobs = jobs }

    /// Every job when `names` is empty; else the named jobs and, `withNeeds`, every job they need, transitively; in
    /// file order.
    public func selected(_ names: [String], withNeeds: Bool) -> [JobSpec] {
        guard !names.isEmpty else { return jobs }
        var wanted = Set(names)
        if withNeeds {
            // Walking backwards visits every job after all the jobs that need it.
            for job in jobs.reversed() where wanted.contains(job.name) { wanted.formUnion(job.needs) }
        }
        return jobs.filter { wanted.contains($0.name) }
    }
}

extension RunReport.Job {
    /// The report of `job` when it did not run.
    package init(skipped job: JobSpec) {
        self.init(name: job.name, type: job.type, status: .skipped, counts: [:], failures: [], failuresOmitted: 0)
    }
}
