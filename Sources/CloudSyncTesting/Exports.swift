// Tests get the loopback server, its fault plans and the emulators from here, as they get the test doubles.
@_exported import CloudSyncEmulator
@_exported import CloudSyncHTTPServer
