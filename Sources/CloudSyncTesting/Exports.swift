// Tests get the loopback server and its fault plans from here, as they get the test doubles.
@_exported import CloudSyncHTTPServer
