internal import CMalloc

/// How the runner's process hands memory back: buffers of a pack's size go back to the system when freed.
public enum ProcessMemory {
    /// Allocations of at least this many bytes are mapped pages of their own, unmapped when freed.
    public static let mappedFromBytes: Int32 = 4 << 20

    /// Sets glibc's mmap threshold to ``mappedFromBytes`` for the whole process; call once, first thing.
    ///
    /// By default glibc raises the threshold each time a mapped block is freed (up to 32 MiB), after which the
    /// multi-MiB buffers a backup cycles through (a pack, its compressed and sealed copies) come from the heap and
    /// stay there once freed: peak memory grew by a few packs. A fixed threshold keeps each in pages of its own.
    public static func returnLargeBuffersToTheSystem() {
        _ = cloudsync_set_mmap_threshold(mappedFromBytes)
    }
}
