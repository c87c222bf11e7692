/// Pipeline files tests write: the YAML of the common shapes, so a test says only what differs.
public enum PipelineText {
    /// A pipeline over two directory providers, `from` (at `source`) and `to` (at `destination`, created), with
    /// `jobs` (one migrate from `from` to `to` unless given); `state` and `schedule` are written as given (YAML) when
    /// there are.
    public static func directoryCopy(
        name: String, source: String, destination: String, state: String? = nil, schedule: String? = nil,
        jobs: [String] = ["{ type: migrate, name: copy, from: from, to: to }"]
    ) -> String {
        var text = "version: 1\nname: \(name)\n"
        if let state { text += "state: \(state)\n" }
        if let schedule { text += "schedule: \(schedule)\n" }
        text += """
            providers:
              from: { type: directory, path: \(source) }
              to: { type: directory, path: \(destination), create: true }
            store: { providers: [from, to] }
            jobs:

            """
        for job in jobs { text += "  - \(job)\n" }
        return text
    }
}
