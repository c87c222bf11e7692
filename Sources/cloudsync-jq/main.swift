import CloudSyncJQ

#if canImport(Glibc)
    import Glibc
#endif

exit(JQWorker.main(arguments: Array(CommandLine.arguments.dropFirst())))
