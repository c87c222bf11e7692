import CloudSyncCLI
import CloudSyncRunner
import Foundation

ProcessMemory.returnLargeBuffersToTheSystem()
let tool = CommandLineTool(
    standardOutput: { text in FileHandle.standardOutput.write(Data(text.utf8)) },
    standardError: { text in FileHandle.standardError.write(Data(text.utf8)) })
exit(await tool.run(Array(CommandLine.arguments.dropFirst())).rawValue)
