/// What a jq program may spend on one value before it is stopped and the value fails.
public struct JQLimits: Sendable, Equatable {
    /// CPU seconds per value (CPU time, so a busy machine does not stop a program that a quiet one finishes).
    public var cpuSeconds: Double
    /// Bytes the worker's heap may hold: libjq's values, the program's state and the value itself.
    public var memoryBytes: Int
    /// Outputs kept per value; a program with more is stopped there (``JQResult/more``).
    public var maxOutputs: Int

    /// Limits of `cpuSeconds` CPU seconds and `memoryBytes` bytes per value, keeping `maxOutputs` outputs.
    public init(cpuSeconds: Double = 10, memoryBytes: Int = 1 << 30, maxOutputs: Int = 2) {
        self.cpuSeconds = cpuSeconds
        self.memoryBytes = memoryBytes
        self.maxOutputs = maxOutputs
    }

    /// The limits as the worker's arguments.
    var workerArguments: [String] {
        [
            "--worker", "--cpu-seconds", String(cpuSeconds), "--memory-bytes", String(memoryBytes),
            "--max-outputs", String(maxOutputs),
        ]
    }

    /// The limits ``workerArguments`` gave; nil for anything else.
    init?(workerArguments arguments: [String]) {
        guard arguments.count == 7, arguments[0] == "--worker", arguments[1] == "--cpu-seconds",
            arguments[3] == "--memory-bytes", arguments[5] == "--max-outputs",
            let cpu = Double(arguments[2]), cpu > 0, let memory = Int(arguments[4]), memory > 0,
            let outputs = Int(arguments[6]), outputs > 0
        else { return nil }
        self.init(cpuSeconds: cpu, memoryBytes: memory, maxOutputs: outputs)
    }
}
